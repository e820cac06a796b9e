"""OpenCode's permission requests (`permission.asked`), answered by the room or refused.

OpenCode asks only where its own configuration says `"ask"` for a tool (`"permission":
{"bash": "ask"}`), or for its built-in guards that ask by default (a path outside the
project, a tool called again and again): where its operator wants a person to decide.
The run then waits, without a deadline, for `POST /permission/{requestID}/reply`
(`reply`: `once`, `always` or `reject`, and a `message` the model reads; 1.18.33, where
`POST /session/{id}/permissions/{permissionID}` is its deprecated form, without the
message). The request (observed, 1.18.33):

    {"id": "per_…", "sessionID": "ses_…", "permission": "bash",
     "patterns": ["touch made-by-the-model"], "metadata": {"command": "touch made-by-the-model"},
     "always": ["touch *"], "tool": {"messageID": "msg_…", "callID": "call_…"}}

`BAND_OPENCODE_PERMISSIONS` says who answers:

* `ask` (the default): `turn.ask(..., choices=("allow", "always", "deny"))`, answered
  by the person whose message the turn answers. `allow` replies `once`; `always`
  replies `always` (OpenCode then allows the request's `always` patterns, unasked);
  `deny`, or no answer within `Policy.ask_timeout`, replies `reject` with a message
  the model reads, so the run goes on and can say what happened.
* `deny`: refused at once, with a message, as `deny` above.
* `ignore`: not answered by this agent: another OpenCode client (its TUI, its web UI)
  answers, and the run waits until then (what the adapter did before it knew the
  event).

Why `ask` is the default: nothing runs that nobody allowed (a refusal, a deadline and a
port that cannot ask all refuse; under the runs API the client answers an approval), only
the turn's sender may answer, and an interrupt or stop during the wait ends the turn and
aborts the run as any await does.
The request OpenCode leaves pending after an abort is refused by the stop.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

import httpx2

from ..contract import Turn, UpstreamFault, call_upstream, request_body
from ..errors import CannotAskError, ConfigurationError
from ..policy import UpstreamPolicy
from ._opencode_events import Event, OpenCodeError

__all__ = ["CHOICES", "MODES", "Mode", "answer_permission", "check_mode", "question", "reject"]

log = logging.getLogger("band_trio.adapters.opencode")

Mode = Literal["ask", "deny", "ignore"]
MODES: tuple[Mode, ...] = ("ask", "deny", "ignore")
CHOICES = ("allow", "always", "deny")
"""The room's choices; `deny` last, the answer at the deadline."""
REPLIES = {"allow": "once", "always": "always", "deny": "reject"}
SHOWN = 300
"""Characters of the request's patterns a question shows."""


def check_mode(mode: str) -> Mode:
    """`mode` if it is one of `MODES`, else a `ConfigurationError` naming them."""
    for known in MODES:
        if mode == known:
            return known
    raise ConfigurationError(f"permissions must be one of {', '.join(MODES)}, not {mode!r}")


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def question(request: dict[str, Any]) -> str:
    """The question for one request: the tool, what it would do, what `always` allows."""
    tool = str(request.get("permission") or "a tool")
    patterns = [str(p) for p in request.get("patterns") or () if p]
    what = _shorten(", ".join(patterns), SHOWN) if patterns else "(no details given)"
    text = f"OpenCode asks to use {tool}: {what}\nallow: this once; "
    always = [str(p) for p in request.get("always") or () if p]
    if always:
        text += f"always: also {_shorten(', '.join(always), SHOWN)} from now on, unasked; "
    else:
        text += "always: this and the like from now on, unasked; "
    return text + "deny: refuse it."


async def answer_permission(
    turn: Turn,
    client: httpx2.AsyncClient,
    event: Event,
    mode: Mode,
    *,
    params: dict[str, str],
    upstream: UpstreamPolicy,
) -> str | None:
    """Answer a `permission.asked` event as `mode` says; the reply sent (None: left to
    another client). The wait for the room is the turn's: an abort cancels it here."""
    if mode == "ignore":
        return None
    request = event.get("properties") or {}
    request_id = str(request.get("id") or "")
    if not request_id:
        raise OpenCodeError(f"a permission request without an id: {request!r:.200}")
    choice, note = "deny", "This agent's operator refuses such requests."
    if mode == "ask":
        try:
            choice = await turn.ask(question(request), choices=CHOICES)
        except CannotAskError:
            note = "Nobody could be asked for permission here."
        else:
            note = "The person asked in the room refused it (or did not answer in time)."
    reply = REPLIES[choice]
    await send_reply(client, request_id, reply, note if reply == "reject" else None,
                     params=params, upstream=upstream, turn=turn)  # fmt: skip
    log.info("OpenCode's %s request %s: %s", request.get("permission"), request_id, reply)
    return reply


async def reject(
    client: httpx2.AsyncClient,
    request_id: str,
    *,
    params: dict[str, str],
    upstream: UpstreamPolicy,
) -> None:
    """Refuse a request OpenCode left pending after an abort (within the stop's time)."""
    note = "The turn was aborted in the room."
    await send_reply(client, request_id, "reject", note, params=params, upstream=upstream)


async def send_reply(
    client: httpx2.AsyncClient,
    request_id: str,
    reply: str,
    message: str | None,
    *,
    params: dict[str, str],
    upstream: UpstreamPolicy,
    turn: Turn | None = None,
) -> None:
    """`POST /permission/{id}/reply` under the retry rules. OpenCode answers `true`; a
    request already answered elsewhere (or gone with its run) is logged, not an error."""
    body: dict[str, str] = {"reply": reply}
    if message:
        body["message"] = message
    path = f"/permission/{request_id}/reply"

    async def attempt() -> bytes:
        try:
            _, answer = await request_body(client, "POST", path, upstream, params=params, json=body)
        except UpstreamFault as fault:
            if fault.fault.status not in (400, 404):
                raise
            return f"{fault.fault.status}: {fault}".encode()[:300]  # answered, or gone
        return answer.strip()

    answered: bytes = await call_upstream(
        turn, attempt, peer="OpenCode", upstream=upstream, error=OpenCodeError
    )
    if answered != b"true":
        log.warning("OpenCode did not take the reply to %s: %r", request_id, answered)
