"""The scale floor's bare client, seen from the driver: started, stamped, ended.

With `Options.scale_floor` the run starts a bare client (`_scale_floor`, a
process of its own) at every size beside the agents under test: an agent
identity of its own in as many fresh rooms, its start-up recorded from the
platform's stamps exactly as an agent's is (`_tier.record_start_up`, runtime
`floor`), its CPU time and memory read from `/proc` the same way. Then it
takes the commands of the mass abort's floor (`_mass.floor_wave`) and, last,
of the teardown's: every busy room's claimed message marked at once, then the
socket closed (busy), or the socket closed (idle).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

import trio

from ._bench import Bench, since
from ._subject import Identity, Subject, environment, start
from ._tier import cpu_when_connected, record_start_up

__all__ = ["Bare", "open_bare"]

CLOSE_BUSY = "reply, mark, working: false at once → closed, rooms busy"
"""The busy teardown's floor: every busy room's mark sent at once, then the close."""
CLOSE_IDLE = "close → closed, rooms idle"
"""The idle teardown's floor: the socket's close (every topic left with it)."""


@dataclass(eq=False)
class Bare:
    bench: Bench
    subject: Subject
    ready: bool
    sent: int = 0

    @property
    def identity(self) -> Identity:
        return self.subject.identity

    @property
    def rooms(self) -> int:
        return len(self.identity.rooms)

    async def command(
        self, marks: list[tuple[str, str]], *, close: bool, settle: bool = False
    ) -> tuple[float, float] | None:
        """Send one command; the stamps of its wave's start and of its end (the last
        mark answered, or with `close` the socket closed), or None after the deadline.
        With `settle`, each room's reply and `working: false` go with its mark."""
        label = str(self.sent)
        self.sent += 1
        order = {"marks": marks, "close": close, "label": label, "settle": settle}
        line = json.dumps(order) + "\n"
        stdin = self.subject.process.stdin
        assert stdin is not None
        subject, end = (
            self.subject,
            ("closed", self.identity.agent_id) if close else ("done", label),
        )
        with trio.move_on_after(self.bench.options.load_deadline):
            await stdin.send_all(line.encode())
            wave = await subject.wait("wave", label)
            return wave, await subject.wait(*end)
        return None


async def open_bare(bench: Bench, nursery: trio.Nursery, identity: Identity) -> Bare:
    """Start the bare client in `identity`'s rooms; its start-up rows once it is synced."""
    info, watch = bench.platform.info, bench.watch
    argv = [sys.executable, "-m", "band_trio.bench._scale_floor"]
    env = environment(identity, info.rest_url, info.ws_url)
    subject = await start(nursery, identity, argv, env, stdin=subprocess.PIPE)
    assert subject.process.stdin is not None
    agent = identity.agent_id
    spec = {"ws": info.ws_url, "rest": info.rest_url, "agent": agent, "key": identity.api_key}
    spec["user"] = bench.user_id
    spec["rooms"] = list(identity.rooms)  # type: ignore[assignment]
    ready = False
    pid = subject.process.pid
    cpu_connected: list[float] = []
    with trio.move_on_after(bench.options.startup_deadline):
        async with trio.open_nursery() as watching:
            watching.start_soon(cpu_when_connected, bench, agent, pid, cpu_connected)
            await subject.process.stdin.send_all((json.dumps(spec) + "\n").encode())
            try:
                await subject.wait("ready", agent)  # after its socket opened: stamped by then
                ready = True
            except RuntimeError:  # it exited: its stderr says why
                pass
            watching.cancel_scope.cancel()
    connected = watch.first_after(("connected", agent), 0)
    at_connect = cpu_connected[0] if cpu_connected else None
    record_start_up(
        bench, "floor", "start-up", identity, subject.launched, connected, pid, at_connect
    )
    if not ready:
        tail = " | ".join(subject.stderr_tail[-3:])
        bench.notes.append(f"floor, {len(identity.rooms)} rooms: not synced in time ({tail})")
    return Bare(bench, subject, ready)


async def close_bare(bare: Bare, *, busy: bool) -> None:
    """The teardown's floor: with `busy`, one claimed message in every busy room (all
    but the first, as an agent's tier) settled at once as a busy turn ending is — its
    reply posted, the message marked, `working: false` reported, in that order in each
    room, every room at once — then the socket closed."""
    bench = bare.bench
    series = bench.metric("floor", "teardown", bare.rooms, CLOSE_BUSY if busy else CLOSE_IDLE)
    rooms = bare.identity.rooms[1:] if busy else ()
    marks = [(room, bench.post(room, "floor")) for room in rooms]
    got = await bare.command(marks, close=True, settle=busy) if bare.ready else None
    series.add(None if got is None else since(got[1], got[0]), "the bare client never closed")
    process = bare.subject.process
    with trio.move_on_after(bench.options.exit_deadline):
        await process.wait()
    if process.returncode is None:
        process.kill()
        await process.wait()
