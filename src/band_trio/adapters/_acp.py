"""An adapter for any coding agent that speaks the Agent Client Protocol (ACP) over stdio:
OpenCode (`opencode acp`), Gemini CLI (`gemini --acp`), Claude Code and Codex
through their ACP adapters, Goose, ...

    adapter = AcpAdapter(AcpConfig(command=("opencode", "acp"),
                                   working_directory="/srv/project"))

The adapter owns one agent process per run (`lifespan()`; see `_acp_agent`),
waits for it in `on_started`, and speaks ACP itself, on trio. Per room one ACP
session (`session/new`, in the configured working directory), kept across turns
so the agent holds the conversation; its id is kept in the state file
(`_acp_state`), so that after a crash of the agent, or a restart of band-trio,
the room's session is loaded again (`session/load`) where the agent can. A new
session's first prompt carries the room's recent messages.

A turn is one `session/prompt` with the message; the answer is the text of the
agent's `agent_message_chunk` updates, posted once the prompt is answered
(`stopReason` `end_turn`; a `refusal` fails the message; a turn of tool calls
and no text — OpenCode's, when a permission was refused — is answered with a
line naming them). Each tool call the
agent reports is posted as a `tool_call` event when it starts and a
`tool_result` event when it ends, so the room can follow what the agent does.

How it stops. On interrupt, stop, deadline or shutdown the turn's remote stop
sends `session/cancel` at once (the prompt is the remote work, its session the
handle), marks the session cancelling (a permission request it still makes is
answered `cancelled`), and waits for the prompt's answer: `stopReason:
"cancelled"` (60 ms with OpenCode, whose model stream closes meanwhile) is
`confirmed`. `session/cancel` is a notification: nothing says the agent took it
but the prompt's answer, so none before `confirm_margin` ahead of the stop's
deadline is `unconfirmed`, reported like any overrun, and the room's next prompt
sends `session/cancel` again and waits up to `resettle_grace` for the old one
first. Whatever the cancelled prompt still sends —
updates, a late answer — never reaches the room: its answer is detached when
the turn ends. The session stays: the room's next message goes to it, with a
note saying the previous answer was interrupted or stopped, and why.

Faults. An agent that exits fails the turn with its exit and the last of its
stderr, and the next turn starts a new one (loading the room's session there if
it can). A line over the limit, one that is not JSON, and a request of a method
band-trio does not offer never end the connection (`_jsonrpc`).
"""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager, nullcontext, suppress
from dataclasses import dataclass
from typing import Any

import trio

from ..contract import Adapter, AgentInfo, StopAnswer, StopOutcome, Turn
from ..policy import UpstreamPolicy
from ._abort_note import abort_note
from ._acp_agent import AcpAgent, AcpConnection, AcpError, AcpGone, AcpRpcError
from ._acp_config import AcpConfig
from ._acp_session import Answer, Session
from ._acp_state import SessionMap
from ._jsonrpc import Call
from ._permission_desk import PermissionDesk

__all__ = ["AcpAdapter", "AcpError", "acp"]

log = logging.getLogger("band_trio.adapters.acp")

MAX_HISTORY_CHARS = 2000
"""Characters of one earlier message given to a new session (its head)."""


@dataclass(slots=True)
class _Room:
    session: Session | None = None
    connection: AcpConnection | None = None
    cut: str | None = None
    """The message whose turn was aborted, until the agent has been told."""
    pending: Call | None = None
    """A prompt whose stop was not confirmed: it may still run in the agent."""


class AcpAdapter(Adapter):
    """Answers each message with a prompt in the room's ACP session (see the module).

    `agent`: an `AcpAgent` that someone else runs (several adapters, or a test, sharing
    one process); by default the adapter runs its own for each of its runs."""

    def __init__(self, config: AcpConfig, *, agent: AcpAgent | None = None) -> None:
        self.config = config
        self._owns_agent = agent is None
        self.agent = agent if agent is not None else AcpAgent(config)
        self.sessions = SessionMap(config)
        self._rooms: dict[str, _Room] = {}

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        return self.agent.running() if self._owns_agent else nullcontext()

    async def on_started(self, agent: AgentInfo) -> None:
        """Wait for the agent process (started in the background by `lifespan()`), so no
        room is served before it answers `initialize`; bounded by `Policy.hook_deadline`.
        An agent that cannot start fails the agent's start with the reason."""
        if self._owns_agent:
            await self.agent.connection()

    def session(self, room_id: str) -> str | None:
        """The id of the ACP session of a room, once it has one in this run."""
        room = self._rooms.get(room_id)
        return room.session.id if room is not None and room.session is not None else None

    async def on_room_left(self, room_id: str) -> None:
        """Forget the room's session here (its id stays in the state file: a room joined
        again loads it)."""
        room = self._rooms.pop(room_id, None)
        if room is None:
            return
        if room.pending is not None:
            room.pending.forget()
        if room.connection is not None and room.session is not None:
            room.connection.sessions.pop(room.session.id, None)

    async def on_turn(self, turn: Turn) -> None:
        room = self._rooms.setdefault(turn.room_id, _Room())
        try:
            text = await self._run(turn, room)
        except BaseException as exc:
            if not isinstance(exc, Exception):  # aborted, not failed
                room.cut = turn.message.id  # told by the next turn, which knows why
            raise
        await turn.reply(text)

    # -- one turn -------------------------------------------------------------------

    async def _run(self, turn: Turn, room: _Room) -> str:
        """Send the prompt, post the tool events, and return the answer's text."""
        upstream = turn.upstream
        connection = await self.agent.connection()
        session, fresh = await self._session(turn.room_id, room, connection)
        if room.pending is not None:  # a prompt the last stop could not confirm
            await self._settle(connection, session, room, upstream)
        params = {"sessionId": session.id, "prompt": await self._prompt(turn, room, fresh)}
        answer = Answer(upstream.max_answer_chars)
        session.answer, session.cancelling = answer, False
        desk = session.desk = PermissionDesk() if self.config.permissions == "ask" else None
        call: Call | None = None

        async def stop(session_id: str) -> StopAnswer:
            assert call is not None  # started() comes after the call
            return await self._stop(connection, session, call, upstream)

        try:
            async with turn.remote(stop=stop, name="acp prompt") as work:
                with work.starting():
                    call = await connection.rpc.call("session/prompt", params)
                    room.pending = call
                    work.started(session.id)
                try:
                    result = await _answered(turn, answer, call, desk, self.config.ask_within)
                except AcpGone:  # say how it ended: its exit, the last of its stderr
                    with trio.move_on_after(2 * self.config.kill_grace):
                        await connection.ended.wait()
                    raise AcpGone(connection.reason or connection.rpc.reason) from None
                work.finished()
        finally:
            session.answer = session.desk = None
            if desk is not None:  # after the stop: the agent was told to cancel first
                desk.cancel_all()
            if call is not None and call.done.is_set():
                call.forget()
                room.pending = None
        return _text(answer, result)

    async def _prompt(self, turn: Turn, room: _Room, fresh: bool) -> list[dict[str, Any]]:
        """The prompt's content: the room's recent messages for a new session, a note if
        the last answer was cut off, and the message."""
        parts = []
        if fresh and self.config.history:
            earlier = [
                m
                for m in await turn.history()
                if m.id != turn.message.id and m.message_type == "text" and m.content.strip()
            ][-self.config.history :]
            if earlier:
                lines = (
                    f"{m.sender_name or m.sender_id}: {m.content[:MAX_HISTORY_CHARS]}"
                    for m in earlier
                )
                parts.append("Earlier in this room:\n" + "\n".join(lines))
        note = abort_note(room.cut, turn)
        room.cut = None
        if note:
            parts.append(f"[{note}]")
        parts.append(turn.message.content)
        return [{"type": "text", "text": "\n\n".join(parts)}]

    async def _stop(
        self, connection: AcpConnection, session: Session, call: Call, upstream: UpstreamPolicy
    ) -> StopAnswer:
        """`session/cancel`; `confirmed` once the prompt was answered (waited for until
        `confirm_margin` before the stop's deadline: a notification nobody answered is
        `unconfirmed` with what was seen, not the deadline's bare words)."""
        if not connection.alive:
            await connection.ended.wait()  # its process group ended and reaped
            return StopOutcome.CONFIRMED, f"nothing runs: {connection.reason}"
        if call.done.is_set():
            return StopOutcome.CONFIRMED, "the prompt had already ended"
        session.cancelling = True
        await connection.rpc.notify("session/cancel", {"sessionId": session.id})
        if session.desk is not None:  # its pending permission requests: `cancelled`
            session.desk.cancel_all()
        with trio.move_on_at(trio.current_effective_deadline() - upstream.confirm_margin):
            try:
                result = await call.wait()
            except AcpGone:
                await connection.ended.wait()
                return StopOutcome.CONFIRMED, f"nothing runs: {connection.reason}"
            except AcpRpcError as exc:
                return StopOutcome.CONFIRMED, f"the prompt ended with an error ({exc})"
            reason = result.get("stopReason") if isinstance(result, dict) else None
            return StopOutcome.CONFIRMED, f"the prompt ended ({reason})"
        return StopOutcome.UNCONFIRMED, "session/cancel sent; the prompt was not answered in time"

    async def _settle(
        self, connection: AcpConnection, session: Session, room: _Room, upstream: UpstreamPolicy
    ) -> None:
        """Cancel again a prompt the last stop could not confirm, before the next one."""
        pending, room.pending = room.pending, None
        assert pending is not None
        try:
            if pending.done.is_set():
                return
            log.info(
                "room %s: the last prompt is still running: cancelling it again", session.room_id
            )
            session.cancelling = True
            with trio.move_on_after(upstream.resettle_grace), suppress(AcpError):
                await connection.rpc.notify("session/cancel", {"sessionId": session.id})
                await pending.wait()
        finally:
            pending.forget()

    # -- the room's session ----------------------------------------------------------

    async def _session(
        self, room_id: str, room: _Room, connection: AcpConnection
    ) -> tuple[Session, bool]:
        """The room's session on this agent process, and whether it is new: loaded where
        the agent can (after a restart of either side), else created."""
        if room.session is not None and room.connection is connection:
            return room.session, False
        known = room.session.id if room.session is not None else await self.sessions.get(room_id)
        cwd = self.config.working_directory
        if known is not None and connection.load_session:
            session = connection.sessions[known] = Session(known, room_id)  # replay dropped
            try:
                await self._call(
                    connection, "session/load", {"sessionId": known, "cwd": cwd, "mcpServers": []}
                )
            except AcpRpcError as exc:
                log.warning("room %s: loading its ACP session %s failed (%s)", room_id, known, exc)
                connection.sessions.pop(known, None)
            else:
                log.info("room %s: loaded its ACP session %s", room_id, known)
                room.session, room.connection = session, connection
                return session, False
        answer = await self._call(connection, "session/new", {"cwd": cwd, "mcpServers": []})
        session_id = answer.get("sessionId") if isinstance(answer, dict) else None
        if not isinstance(session_id, str) or not session_id:
            raise AcpError(f"session/new answered without a session id: {answer!r:.200}")
        session = connection.sessions[session_id] = Session(session_id, room_id)
        room.session, room.connection = session, connection
        await self.sessions.put(room_id, session_id)
        return session, True

    async def _call(self, connection: AcpConnection, method: str, params: dict[str, Any]) -> Any:
        with trio.move_on_after(self.config.request_deadline):
            return await connection.request(method, params)
        raise AcpError(f"{method} got no answer within {self.config.request_deadline:g}s")


async def _answered(
    turn: Turn, answer: Answer, call: Call, desk: PermissionDesk | None, within: float | None
) -> Any:
    """The prompt's result, its tool events posted meanwhile and its permission requests
    put to the room (`desk`, when the adapter asks); a failure of either is raised as
    itself (the nursery hidden), the prompt's first."""
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_post_events, turn, answer)
            asking = trio.CancelScope()
            if desk is not None:
                nursery.start_soon(_ask_room, desk, turn, within, asking)
            try:
                result = await call.wait()
            finally:
                asking.cancel()  # the prompt is over: nothing more to ask
            answer.close()
    except BaseExceptionGroup as group:
        errors = [e for e in group.exceptions if isinstance(e, Exception)]
        if len(errors) == len(group.exceptions) == 1:
            raise errors[0] from None
        raise
    return result


async def _ask_room(
    desk: PermissionDesk, turn: Turn, within: float | None, scope: trio.CancelScope
) -> None:
    with scope:
        await desk.serve(turn, within)


async def _post_events(turn: Turn, answer: Answer) -> None:
    """Post the prompt's tool events as they come, until it is answered; an answer past
    its limit fails the turn at once (whose stop then cancels the prompt)."""
    while await answer.wait_events():
        for event in answer.take_events():
            await turn.send_event(
                event.content, message_type=event.message_type, metadata=event.metadata
            )
    if answer.too_long:
        raise AcpError(f"the agent's answer passed {answer.max_chars} characters")


def _text(answer: Answer, result: Any) -> str:
    """The reply, from the answer and the prompt's result (its `stopReason`)."""
    reason = result.get("stopReason") if isinstance(result, dict) else None
    if answer.too_long:
        raise AcpError(f"the agent's answer passed {answer.max_chars} characters")
    if reason == "refusal":
        raise AcpError("the agent refused to answer (stopReason refusal)")
    if reason == "cancelled":
        raise AcpError("the agent cancelled the prompt by itself")
    text = answer.text()
    if not text and answer.tools():  # it acted, and said nothing (a tool was refused)
        text = f"(The agent ended its turn without a message. Its tool calls: {answer.tools()}.)"
    if not text:
        raise AcpError(f"the agent's answer had no text (stopReason {reason!r})")
    if reason in ("max_tokens", "max_turn_requests"):
        text += f"\n\n[The agent stopped early: {reason}.]"
    return text


def acp() -> AcpAdapter:
    """The adapter configured from the environment (`--adapter band_trio.adapters:acp`);
    see `AcpConfig.from_env` for the `BAND_ACP_*` variables."""
    return AcpAdapter(AcpConfig.from_env())
