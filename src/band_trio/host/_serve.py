"""`serve_host`: the host's key checked, its rooms run, its app served until a stop.

The key is checked before anything is served (`GET /me`): with a key the
platform refuses, or another agent's, no turn could run, so the host does not
start (`AuthenticationError`), as an agent does not. The adapter's
`lifespan()` is entered only then, around the serving.

A graceful stop is the server's: it takes no new request and gives the open
ones `BridgePolicy.health_grace`, then cancels them, and a cancelled request
aborts its turn as a shutdown (its message left `processing`). What the stop
waits for is said at WARNING (`_Waiting`), as an agent's stop says it.
"""

from __future__ import annotations

import logging

import trio

from .. import errors
from ..link import RestClient
from ..observe import hooks as observe
from ..server import Listening, ServeSettings, serve
from ._app import HostApp

__all__ = ["serve_host"]

log = logging.getLogger("band_trio.host")


class _Waiting:
    """What a graceful stop of the host waits for, said at WARNING (a person who pressed
    Ctrl-C reads it at the default level): the turns still running and the grace, then
    whether they finished within it."""

    def __init__(self, app: HostApp, grace: float) -> None:
        self._app = app
        self._grace = grace
        self._began: float | None = None
        self._scope = trio.CancelScope()

    def end(self) -> None:
        """The serving is over: no stop to wait for any more."""
        self._scope.cancel(reason="the host stopped serving")

    async def announce(self, stop: trio.Event) -> None:
        with self._scope:
            await stop.wait()
        running = self._app.running_turns()
        if self._scope.cancelled_caught or not running:
            return
        self._began = trio.current_time()
        named = ", ".join(f"room {room}: {message}" for room, message in running[:5])
        more = f" and {len(running) - 5} more" if len(running) > 5 else ""
        log.warning(
            "stopping: waiting up to %gs (BridgePolicy.health_grace) for %d running turn(s) "
            "to finish (%s%s); then they are cancelled",
            self._grace,
            len(running),
            named,
            more,
        )

    def over(self) -> None:
        """The serving ended: the turns waited for finished, or were cancelled."""
        if self._began is None:
            return
        took = trio.current_time() - self._began
        if took < self._grace and not self._app.running_turns():
            log.warning(
                "stopping: the running turn(s) finished after %.1fs of the %gs grace: "
                "stopped gracefully",
                took,
                self._grace,
            )


async def serve_host(
    app: HostApp,
    *,
    api_key: str,
    rest_url: str,
    host: str,
    port: int,
    stop: trio.Event,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Check the key (`GET /me`: `AuthenticationError` when the platform refuses it or
    it is another agent's),
    then serve `app` on `host:port` until `stop`, with the identity's REST client;
    `task_status.started(bound_port)`. Turns still open at the end get the grace,
    then are cancelled like a shutdown: their messages are left `processing`. The
    adapter's `lifespan()` is entered once the key is known good, around the serving.

    The caller checks the bind (`band_trio.server.check_bind`)."""
    policy = app.bridge_policy
    settings = ServeSettings(grace=policy.health_grace, policy=policy.server, log=log)
    async with RestClient(rest_url, api_key, policy=app.policy) as rest:
        profile = await rest.me()
        if profile.id != app.agent_id:  # refused as the socket refuses an agent (403)
            raise errors.AuthenticationError(
                403, f"the API key is {profile.id}'s, not agent {app.agent_id}'s", code="forbidden"
            )
        app.bind(rest)
        tracked = observe.track(app.sample)  # the gauges of /metrics, while it serves
        try:
            async with app.adapter.lifespan(), trio.open_nursery() as nursery:
                await nursery.start(app.rooms.run)  # the turns' rooms, until the serving ends
                waiting = _Waiting(app, policy.health_grace)
                nursery.start_soon(waiting.announce, stop)

                async def serving(*, task_status: trio.TaskStatus[Listening]) -> None:
                    try:
                        await serve(app, host, port, settings, stop=stop, task_status=task_status)
                        waiting.over()
                    finally:  # requests still open were cancelled: their turns aborted
                        waiting.end()
                        app.rooms.close()

                listening: Listening = await nursery.start(serving)
                task_status.started(listening.port)
        finally:
            observe.untrack(tracked)
