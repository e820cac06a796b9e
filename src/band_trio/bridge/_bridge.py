"""The bridge: N agent identities, each its own runner, in one nursery.

    Bridge.run (nursery)
    ├── identity <name>         one runner each (`Identity.run`); one ending for
    │                           good does not touch the others
    ├── the targets' clients    one HTTP client per target origin, shared by the
    │                           identities forwarding there, closed after them all
    └── health server           `GET /health`, if configured

`run` returns once every identity has ended: all closed (`close()`, a signal),
or ended for good; `BridgeResult.all_lost` says the second, and the CLI exits
non-zero then. One `CapacityLimiter` caps the forwards in flight over every
identity and room (`BridgePolicy.max_forwards`), another the connection attempts
in their set-up (`BridgePolicy.max_connects`): a thousand identities start (or
reconnect after an outage) a bounded number at a time, never all at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from functools import partial

import trio

from .. import errors
from ..policy import Policy
from ..runtime.parts import Changes, LinkEnd
from ..server import Listening, ServeSettings, check_bind, serve
from ._config import BridgeConfig
from ._health import ConnectStats, HealthApp
from ._identity import Identity, IdentityStatus
from ._policy import BridgePolicy
from ._targets import TargetClients

__all__ = ["Bridge", "BridgeResult"]

log = logging.getLogger("band_trio.bridge")


@dataclass(frozen=True, slots=True)
class BridgeResult:
    """How each identity ended, by name."""

    ends: Mapping[str, LinkEnd]

    @property
    def lost(self) -> list[str]:
        """The identities that ended for good (not by being closed)."""
        return [n for n, e in self.ends.items() if e.terminal is not None or e.error is not None]

    @property
    def all_lost(self) -> bool:
        return bool(self.ends) and len(self.lost) == len(self.ends)

    @property
    def all_refused(self) -> bool:
        """Every identity was ended by the platform itself: a terminal disconnect or a
        refused key (not an outage at start-up)."""
        return bool(self.ends) and all(
            end.terminal is not None or isinstance(end.error, errors.AuthenticationError)
            for end in self.ends.values()
        )


class Bridge:
    """Forwards the events of every configured identity to its target."""

    def __init__(
        self,
        config: BridgeConfig,
        *,
        policy: Policy | None = None,
        bridge_policy: BridgePolicy | None = None,
    ) -> None:
        if config.health is not None:  # loopback unless the config says otherwise
            check_bind(
                config.health[0],
                what="the bridge's health endpoint",
                allow_remote=config.allow_remote,
                opt_in="allow_remote = true in [bridge]",
            )
        self.config = config
        self.policy = policy or Policy()
        self.bridge_policy = bridge_policy or config.policy
        self.changes = Changes()
        self._limiter = trio.CapacityLimiter(self.bridge_policy.max_forwards)
        self._connects = trio.CapacityLimiter(self.bridge_policy.max_connects)
        self.identities = {
            identity.name: Identity(
                identity,
                policy=self.policy,
                bridge_policy=self.bridge_policy,
                limiter=self._limiter,
                connects=self._connects,
                changes=self.changes,
            )
            for identity in config.identities
        }
        self._closing = trio.Event()
        self.health_port: int | None = None
        """The port `GET /health` is served on, once serving."""

    def statuses(self) -> list[IdentityStatus]:
        return [identity.status() for identity in self.identities.values()]

    @property
    def connects(self) -> ConnectStats:
        """The connect limiter now: its limit, attempts in their set-up, and waiting."""
        stats = self._connects.statistics()
        return ConnectStats(
            limit=int(stats.total_tokens),
            connecting=stats.borrowed_tokens,
            waiting=stats.tasks_waiting,
        )

    @property
    def healthy(self) -> bool:
        return all(identity.connected for identity in self.identities.values())

    def close(self) -> None:
        """Stop gracefully: every link closes, forwards in flight get the grace."""
        self._closing.set()
        for identity in self.identities.values():
            identity.close()

    def hard_stop(self, reason: str = "stopped at once") -> None:
        """Stop now (a second signal): every forward is aborted, its message left
        `processing`, and every shielded wait ends within `Policy.hard_stop_grace`."""
        self._closing.set()
        for identity in self.identities.values():
            identity.hard_stop(reason)

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once `predicate()` holds, re-checked at every change (a connect, a
        room, a forward starting or ending, a signal). The caller sets the deadline."""
        while not predicate():
            await self.changes.wait()

    async def run(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> BridgeResult:
        """Run every identity until all have ended; `task_status.started()` once the
        health server (if any) listens and the runners are started."""
        ends: dict[str, LinkEnd] = {}
        stop_health = trio.Event()
        async with trio.open_nursery() as nursery:
            health = self.config.health
            if health is not None:
                settings = ServeSettings(
                    grace=self.bridge_policy.health_grace,
                    policy=self.bridge_policy.server,
                    log=logging.getLogger("band_trio.bridge.server"),  # quiet unless asked
                )
                app = HealthApp(self.statuses, lambda: self.connects)
                listening: Listening = await nursery.start(
                    partial(serve, app, health[0], health[1], settings, stop=stop_health)
                )
                self.health_port = listening.port
            async with AsyncExitStack() as stack:  # the targets' clients, once all ended
                clients = TargetClients(self.bridge_policy, stack)
                async with trio.open_nursery() as runners:
                    for name, identity in self.identities.items():
                        runners.start_soon(
                            _run_one, identity, ends, clients, name=f"identity {name}"
                        )
                    task_status.started()
            stop_health.set()
        result = BridgeResult(ends)
        if result.all_lost:
            log.error("every identity ended for good: %s", ", ".join(result.lost))
        return result


async def _run_one(identity: Identity, ends: dict[str, LinkEnd], clients: TargetClients) -> None:
    """One identity's runner; a crash (a bug) ends that identity only, logged."""
    name = identity.config.name
    try:
        ends[name] = await identity.run(clients)
    except Exception as exc:
        log.exception("identity %s crashed; the other identities go on", name)
        identity.ended = f"crashed: {type(exc).__name__}: {exc}"
        ends[name] = LinkEnd(error=errors.BandTrioError(identity.ended))
