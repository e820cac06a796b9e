"""An adapter for the GitHub Copilot CLI, run offline with a model server of your own (BYOK).

    adapter = CopilotAdapter(CopilotConfig(cli=".../copilot", model="gpt-4o",
                                           base_url="http://127.0.0.1:11434/v1"))

The adapter owns one CLI process per run of the agent (`lifespan()`; see
`_copilot_cli`), waits for it in `on_started`, and speaks its JSON-RPC over
stdio itself, on trio. Per room one
Copilot session, created at the room's first message and kept across turns, so
the CLI holds the conversation; after a crash of the CLI the same session is
resumed on the new process (its history is on disk, in the CLI's state
folder), and in `on_room_left` it is detached and forgotten.

A turn sends `session.send` (in `work.starting()`: the answer names the user
message) and reads the session's events until it is idle again; the text of the
assistant's messages for that user message is the reply. `session.error` fails
the message, and so does a model the CLI keeps retrying more than
`max_retries` times (the session is then aborted).

How it stops. The turn's remote stop is `session.abort`: the CLI cancels its
model call (the upstream stream is closed) and its tools, and the session goes
idle with `aborted: true` — that is `confirmed`; an abort answered without the
idle seen before the deadline is `requested`. The session stays usable: the
room's next message goes to it, with a note saying the previous answer was
interrupted or stopped and why. A stop that finds the CLI gone is `confirmed`
once its process group is reaped.

Safe by default: every tool permission the CLI asks for (a shell command, a file
write, a read outside its folder, a URL) is denied, unless its kind is in
`CopilotConfig.allow`. With `permissions="ask"` the rest are put to the room
(`Turn.ask`, allow or deny, deny at the deadline) while the turn waits for the
session; an interrupt or a stop during the question aborts the session and then
answers the request `reject`. The CLI works in a folder of its own (a new temporary one
per run unless one is named) and gets none of the agent's environment.

Guidance (a `WhileBusy.STEER` room): a message taken while the turn runs goes to the
CLI at once with `session.send` in immediate mode, and the turn ends once the CLI
has answered it too (`_copilot_guidance`).
"""

from __future__ import annotations

import logging
import uuid
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import trio

from ..contract import Adapter, AgentInfo, Message, StopAnswer, StopOutcome, Turn
from ..policy import UpstreamPolicy
from ._abort_note import abort_note
from ._copilot_cli import Connection, CopilotCli
from ._copilot_config import CopilotConfig
from ._copilot_errors import CopilotError, CopilotGone, CopilotRpcError
from ._copilot_guidance import IMMEDIATE, refuses_immediate, steering
from ._copilot_session import Run, Session
from ._guidance import guidance_text
from ._permission_desk import PermissionDesk, asking_while

__all__ = ["CopilotAdapter", "CopilotError", "copilot"]

log = logging.getLogger("band_trio.adapters.copilot")


@dataclass(slots=True)
class _Room:
    session_id: str
    session: Session | None = None
    """The session as opened on `connection` (None until the room's first message)."""
    connection: Connection | None = None
    created: bool = False
    """The CLI has the session (in its state folder): a new CLI resumes it."""
    cut: str | None = None
    """The message whose turn was aborted, until the model has been told."""


class CopilotAdapter(Adapter):
    """Answers each message with a prompt in the room's Copilot session (see the module).

    `cli`: a `CopilotCli` that someone else runs (several adapters, or a test, sharing
    one process); by default the adapter runs its own for each of its runs."""

    def __init__(self, config: CopilotConfig, *, cli: CopilotCli | None = None) -> None:
        self.config = config
        self._owns_cli = cli is None
        self.cli = cli if cli is not None else CopilotCli(config)
        self._rooms: dict[str, _Room] = {}

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        return self.cli.running() if self._owns_cli else nullcontext()

    async def on_started(self, agent: AgentInfo) -> None:
        """Wait for the CLI (started in the background by `lifespan()`), so that no room
        is served before it answers; bounded by `Policy.hook_deadline` (10 s; a cold
        start took 3 s here). A CLI that cannot start fails the agent's start with the
        reason. Only the agent calls this hook: under the runs API or a host, the
        first turn waits for the CLI instead."""
        if self._owns_cli:
            await self.cli.connection()

    def session(self, room_id: str) -> str | None:
        """The id of the Copilot session kept for a room, once it was created."""
        room = self._rooms.get(room_id)
        return room.session_id if room is not None and room.created else None

    async def on_room_left(self, room_id: str) -> None:
        room = self._rooms.pop(room_id, None)
        connection = room.connection if room is not None else None
        if room is None or connection is None or not connection.alive:
            return
        connection.sessions.pop(room.session_id, None)
        with trio.move_on_after(self.config.request_deadline):
            try:  # the CLI frees it; its history stays in the state folder
                await connection.request("session.detach", {"sessionId": room.session_id})
            except CopilotError as exc:
                log.debug("room %s: detaching the Copilot session failed: %s", room_id, exc)

    async def on_turn(self, turn: Turn) -> None:
        room = self._rooms.setdefault(turn.room_id, _Room(str(uuid.uuid4())))
        try:
            text = await self._run(turn, room)
        except BaseException as exc:
            if not isinstance(exc, Exception):  # aborted, not failed
                room.cut = turn.message.id  # told by the next turn, which knows why
            raise
        await turn.reply(text)

    # -- one turn -------------------------------------------------------------------

    async def _run(self, turn: Turn, room: _Room) -> str:
        """Send the prompt and follow the session until it is idle; return the text."""
        upstream = turn.upstream  # its answer limit, the stop's margin, the resettle grace
        connection = await self.cli.connection()
        session = await self._session(turn.room_id, room, connection)
        if session.busy:  # a run that the last stop could not confirm
            await self._settle(connection, session, upstream)
        run = Run(self.config.max_retries, upstream.max_answer_chars, self.config.seen_messages)

        async def stop(session_id: str) -> StopAnswer:
            return await self._stop(connection, session, run, upstream)

        params = self._prompt(turn, room, session)
        asks = self.config.permissions == "ask"
        desk = PermissionDesk() if asks else None
        session.run, session.desk = run, desk
        try:
            async with turn.remote(stop=stop, name="copilot session") as work:
                with work.starting():
                    answer = await self._call(connection, "session.send", params)
                    run.message_id = _message_id(answer)
                    work.started(session.id)

                async def guide(message: Message) -> None:
                    await self._guide(connection, session, run, message)

                async with steering(turn, session, run, guide, lambda: connection.steers):
                    await asking_while(
                        desk, turn, self.config.ask_within, lambda: session.wait(lambda: run.done)
                    )
                if not run.ended:  # the model keeps failing: the remote stop aborts it
                    raise CopilotError(run.failure or "the run failed")
                work.finished()
        finally:
            session.run = session.desk = None
            if desk is not None:  # after the stop's abort: none is left waiting
                desk.cancel_all()
        if run.failure:
            raise CopilotError(run.failure)
        text = run.text()
        if not text:
            raise CopilotError("Copilot's answer had no text")
        return text

    async def _guide(
        self, connection: Connection, session: Session, run: Run, message: Message
    ) -> None:
        """Pass one message of guidance on to the running turn (see `_copilot_guidance`);
        a CLI that refuses the mode gets it queued, and no more guidance is taken."""
        params: dict[str, Any] = {
            "sessionId": session.id,
            "prompt": guidance_text(message),
            "mode": IMMEDIATE,
        }
        try:
            answer = await self._call(connection, "session.send", params)
        except CopilotRpcError as exc:
            if not refuses_immediate(exc):
                raise
            connection.steers = False
            log.warning(
                "room %s: the Copilot CLI refused a message in immediate mode (%s): it is "
                "queued, and no more guidance is taken while this CLI runs",
                session.room_id,
                exc,
            )
            del params["mode"]
            answer = await self._call(connection, "session.send", params)
        run.guided(_message_id(answer))
        session.notify()
        log.info(
            "room %s: guidance %s passed on to the Copilot session", session.room_id, message.id
        )

    def _prompt(self, turn: Turn, room: _Room, session: Session) -> dict[str, Any]:
        """`session.send`'s parameters: the message, after a note if the last was cut."""
        prompt = turn.message.content
        note = abort_note(room.cut, turn)
        room.cut = None
        params: dict[str, Any] = {"sessionId": session.id, "prompt": prompt}
        if note:
            params["prompt"] = f"[{note}]\n\n{prompt}"
            params["displayPrompt"] = prompt
        return params

    async def _stop(
        self, connection: Connection, session: Session, run: Run, upstream: UpstreamPolicy
    ) -> StopAnswer:
        """`session.abort`; `confirmed` once the session went idle again (waited for until
        `confirm_margin` before the stop's deadline, so an accepted abort is `requested`)."""
        if not connection.alive:
            await connection.ended.wait()  # its process group ended and reaped
            return StopOutcome.CONFIRMED, f"nothing runs: {connection.reason}"
        if run.ended:
            return StopOutcome.CONFIRMED, "the run had already ended"
        idles = session.idles
        answer = await connection.request("session.abort", {"sessionId": session.id})
        if session.desk is not None:  # a request still waiting for the room: refused
            session.desk.cancel_all()
        if isinstance(answer, dict) and answer.get("success") is False:
            return StopOutcome.UNCONFIRMED, f"session.abort answered {answer!r:.200}"
        with trio.move_on_at(trio.current_effective_deadline() - upstream.confirm_margin):
            try:
                await session.wait(lambda: session.idles > idles)
            except CopilotGone:
                await connection.ended.wait()
                return StopOutcome.CONFIRMED, f"nothing runs: {connection.reason}"
            how = "aborted" if session.last_idle_aborted else "not marked aborted"
            return StopOutcome.CONFIRMED, f"the session went idle ({how})"
        return StopOutcome.REQUESTED, "session.abort answered; the session did not go idle in time"

    async def _settle(
        self, connection: Connection, session: Session, upstream: UpstreamPolicy
    ) -> None:
        """Abort a run the last stop could not confirm, before the next prompt."""
        log.info("room %s: the Copilot session is still busy: aborting it again", session.room_id)
        idles = session.idles
        with trio.move_on_after(upstream.resettle_grace):
            await connection.request("session.abort", {"sessionId": session.id})
            await session.wait(lambda: session.idles > idles)

    # -- the room's session ----------------------------------------------------------

    async def _session(self, room_id: str, room: _Room, connection: Connection) -> Session:
        """The room's session on this CLI: created, or resumed after a restart."""
        if room.session is not None and room.connection is connection:
            return room.session
        session = Session(room.session_id, room_id, self.config.allow, connection.rpc.post)
        connection.open_session(session)  # before the call: its first events route here
        method = "session.resume" if room.created else "session.create"
        try:
            await self._call(connection, method, self._session_params(room_id, session.id))
        except CopilotRpcError as exc:
            if method != "session.resume":
                raise
            log.warning("room %s: resuming its Copilot session failed (%s)", room_id, exc)
            connection.sessions.pop(session.id, None)
            room.session_id = str(uuid.uuid4())
            session = Session(room.session_id, room_id, self.config.allow, connection.rpc.post)
            connection.open_session(session)
            await self._call(
                connection, "session.create", self._session_params(room_id, session.id)
            )
            method = "session.create"
        if method == "session.resume":
            log.info("room %s: resumed its Copilot session on the new CLI", room_id)
        room.created = True
        room.session, room.connection = session, connection
        return session

    def _session_params(self, room_id: str, session_id: str) -> dict[str, Any]:
        config = self.config
        provider: dict[str, Any] = {
            "type": config.provider_type,
            "baseUrl": config.base_url,
            "wireApi": config.wire_api,
        }
        if config.api_key:
            provider["apiKey"] = config.api_key
        return {
            "sessionId": session_id,
            "name": f"Band {room_id}",
            "clientName": "band-trio",
            "model": config.model,
            "provider": provider,
            "streaming": True,  # session.abort closes the model stream only when streaming
            "workingDirectory": self.cli.working_directory,
            "requestPermission": True,  # every request comes to us: denied unless allowed
            "requestUserInput": False,
            "requestElicitation": False,
            "requestExitPlanMode": False,
            "requestAutoModeSwitch": False,
            "includeSubAgentStreamingEvents": False,
        }

    async def _call(self, connection: Connection, method: str, params: dict[str, Any]) -> Any:
        with trio.move_on_after(self.config.request_deadline):
            return await connection.request(method, params)
        raise CopilotError(f"{method} got no answer within {self.config.request_deadline:g}s")


def _message_id(answer: Any) -> str:
    message_id = answer.get("messageId") if isinstance(answer, dict) else None
    if not isinstance(message_id, str):
        raise CopilotError(f"session.send answered without a message id: {answer!r:.200}")
    return message_id


def copilot() -> CopilotAdapter:
    """The adapter configured from the environment (`--adapter band_trio.adapters:copilot`);
    see `CopilotConfig.from_env` for the `BAND_COPILOT_*` variables."""
    return CopilotAdapter(CopilotConfig.from_env())
