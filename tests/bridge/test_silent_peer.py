"""A target that accepts the forward and never answers cannot hold the bridge (issue 21).

The A2A target's start (the request and its first event, which names the task)
runs shielded, so that a cancel that lands meanwhile does not orphan the task;
from the forward's abort on it gets `backend_stop_grace`. Every canceller of a
forward records that abort before it cancels — the room's leave, the graceful
close after its grace, the hard stop, the forward's own deadline — so each of
them ends the forward within that grace, never at httpx2's 300 s backstop (the
old bridge: a left room still running after 6 s, `close()` with a 0.5 s grace not
returned after 5 s, the hard stop 295 s).

The clock is trio's autojump clock, so "never answers" costs nothing and the bound
is read off virtual time: with the old code each of these waited 300 virtual
seconds for httpx2's backstop.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx2
import pytest
import trio

from band_trio.adapters import A2AAdapter
from band_trio.bridge import A2ATargetConfig, BridgePolicy, IdentityConfig
from band_trio.platform import Platform
from peers import SilentPeer, silent_peer
from support import HOST_TOKEN, envelope, status

from ._helpers import FAST, Run, identity, running_bridge, running_host
from .conftest import seeded

GRACE = 2.0
POLICY = FAST.replace(backend_stop_grace=GRACE)
MARGIN = 1.0
"""What the bound allows beyond the grace: the platform's answers, the leave."""


def a2a_identity(platform: Platform, peer: SilentPeer) -> list[IdentityConfig]:
    return [identity(platform, A2ATargetConfig(url=peer.url, streaming=True))]


VIRTUAL = 120
"""A deadline in virtual time around each test: a regression fails, it does not spin."""


@contextlib.asynccontextmanager
async def within(seconds: float) -> AsyncIterator[None]:
    with trio.fail_after(seconds):
        yield


async def forward_held(run: Run, platform: Platform, peer: SilentPeer) -> str:
    """Post a message and return its id once its forward is held by the silent peer."""
    _, room, user = seeded(platform)
    message = platform.post_message(room, user, "hello")
    await peer.wait_requests(1)
    return message


async def test_leaving_the_room_ends_a_forward_held_by_a_silent_peer_within_the_grace(
    platform: Platform, autojump_clock: object
) -> None:
    agent, room, _ = seeded(platform)
    async with (
        within(VIRTUAL),
        silent_peer() as peer,
        running_bridge(a2a_identity(platform, peer), policy=POLICY) as run,
    ):
        rooms = run.bridge.identities[agent].rooms
        assert rooms is not None
        message = await forward_held(run, platform, peer)
        left = trio.current_time()
        platform.remove_participant(room, agent)
        await run.bridge.wait_until(lambda: not rooms.running())
        assert trio.current_time() - left <= GRACE + MARGIN
        assert status(platform, message) == "processing"  # a leave is not an interrupt


async def test_close_with_a_short_grace_returns_within_it_and_the_stop_grace(
    platform: Platform, autojump_clock: object
) -> None:
    shutdown = 0.5
    async with (
        within(VIRTUAL),
        silent_peer() as peer,
        running_bridge(
            a2a_identity(platform, peer),
            policy=POLICY,
            bridge_policy=BridgePolicy(shutdown_grace=shutdown),
        ) as run,
    ):
        message = await forward_held(run, platform, peer)
        closed = trio.current_time()
        run.bridge.close()
        await run.finished.wait()
        assert trio.current_time() - closed <= shutdown + GRACE + MARGIN
    assert status(platform, message) == "processing"  # a shutdown leaves it for replay


async def test_the_hard_stop_ends_a_forward_held_by_a_silent_peer_at_once(
    platform: Platform, autojump_clock: object
) -> None:
    policy = POLICY.replace(hard_stop_grace=0.2)
    async with (
        within(VIRTUAL),
        silent_peer() as peer,
        running_bridge(a2a_identity(platform, peer), policy=policy) as run,
    ):
        message = await forward_held(run, platform, peer)
        stopped = trio.current_time()
        run.bridge.hard_stop("test")
        await run.finished.wait()
        assert trio.current_time() - stopped <= policy.hard_stop_grace + 0.1
    assert status(platform, message) == "processing"


async def test_a_forward_past_its_deadline_ends_a_start_held_by_a_silent_peer(
    platform: Platform, autojump_clock: object
) -> None:
    """`BridgePolicy.forward_deadline` is the forward's own deadline: the start gets the
    grace beyond it, as a turn's start gets beyond the turn's deadline."""
    deadline = 3.0
    async with (
        within(VIRTUAL),
        silent_peer() as peer,
        running_bridge(
            a2a_identity(platform, peer),
            policy=POLICY,
            bridge_policy=BridgePolicy(forward_deadline=deadline, retry_first=600, retry_max=600),
        ) as run,
    ):
        agent, _, _ = seeded(platform)
        ident = run.bridge.identities[agent]
        posted = trio.current_time()
        await forward_held(run, platform, peer)
        await run.bridge.wait_until(lambda: ident.counters.failed == 1)
        assert trio.current_time() - posted <= deadline + GRACE + MARGIN


RETRY = 0.5
"""A failed forward is retried this soon (and the start cut this long after the abort)."""


@contextlib.asynccontextmanager
async def retrying_bridge(platform: Platform) -> AsyncIterator[tuple[Run, SilentPeer]]:
    """A bridge to a silent A2A peer whose failed forwards are retried every `RETRY`."""
    policy = POLICY.replace(backend_stop_grace=RETRY)
    bridge_policy = BridgePolicy(retry_first=RETRY, retry_max=RETRY, shutdown_grace=RETRY)
    async with (
        silent_peer() as peer,
        running_bridge(
            a2a_identity(platform, peer), policy=policy, bridge_policy=bridge_policy
        ) as run,
    ):
        yield run, peer


async def test_an_interrupt_that_cuts_the_start_consumes_the_message_and_forwards_it_once(
    platform: Platform, autojump_clock: object
) -> None:
    """Item 2: the old bridge took the target's error after the cut start for a failed
    forward — `delivering` cleared, the consume skipped, a retry scheduled — and sent
    the interrupted message to the peer a second time."""
    agent, room, _ = seeded(platform)
    async with within(VIRTUAL), retrying_bridge(platform) as (run, peer):
        ident = run.bridge.identities[agent]
        message = await forward_held(run, platform, peer)
        platform.send_control(agent, "interrupt", room_id=room)
        await platform.wait_until(lambda: status(platform, message) == "processed")
        await trio.sleep(10 * RETRY)  # a retry would have come by now
        assert peer.requests == 1
        assert (ident.counters.failed, ident.counters.cancelled) == (0, 1)


async def test_a_stop_that_cuts_the_start_leaves_the_message_and_play_forwards_it_once_more(
    platform: Platform, autojump_clock: object
) -> None:
    agent, room, _ = seeded(platform)
    async with within(VIRTUAL), retrying_bridge(platform) as (run, peer):
        ident = run.bridge.identities[agent]
        message = await forward_held(run, platform, peer)
        platform.send_control(agent, "stop", room_id=room)
        await run.bridge.wait_until(lambda: ident.counters.cancelled == 1 and ident.rooms_idle)
        await trio.sleep(10 * RETRY)  # no retry while stopped
        assert peer.requests == 1 and ident.counters.failed == 0
        assert status(platform, message) == "processing"
        platform.send_control(agent, "play", room_id=room)
        await peer.wait_requests(2)  # the replay: once
        await trio.sleep(10 * RETRY)
        assert peer.requests == 2


@pytest.mark.parametrize("how", ["stop", "hard stop"])
async def test_the_host_stopping_ends_a_turn_held_by_a_silent_peer_within_its_graces(
    platform: Platform, autojump_clock: object, how: str
) -> None:
    """The host's open turns are cancelled by the server past its grace: the lifeline
    task records the abort as it is cancelled with them (before: the start stayed
    shielded until httpx2's 300 s backstop); a hard stop cuts it to its grace."""
    _, room, user = seeded(platform)
    message = platform.post_message(room, user, "hello")
    grace = 0.2

    async def forward(url: str) -> None:
        bearer = {"authorization": f"Bearer {HOST_TOKEN}"}
        async with httpx2.AsyncClient(timeout=None, headers=bearer) as client:
            with contextlib.suppress(httpx2.HTTPError):  # the host going away is the point
                await client.post(url, json=envelope(platform, message))

    async with silent_peer() as peer, trio.open_nursery() as nursery:
        async with running_host(
            platform,
            A2AAdapter(peer.url, streaming=True),
            policy=POLICY.replace(hard_stop_grace=0.1),
            bridge_policy=BridgePolicy(health_grace=grace),
        ) as (app, url):
            nursery.start_soon(forward, url)
            await peer.wait_requests(1)
            stopped = trio.current_time()
            if how == "hard stop":
                app.hard_stop("test")
                while app.running(room) is not None:  # until the turn has ended
                    await app.changes.wait()
                assert trio.current_time() - stopped <= 0.1 + 0.1
        assert trio.current_time() - stopped <= 2 * grace + GRACE + MARGIN
    assert status(platform, message) == "processing"
