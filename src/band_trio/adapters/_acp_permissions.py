"""How the ACP adapter answers `session/request_permission`: by the allow-list, or by
asking the room.

The request names a tool call (`toolCall`: `title`, `kind`, `rawInput`,
`locations`) and the options the agent offers, each with a `kind`: `allow_once`,
`allow_always`, `reject_once`, `reject_always`. The answer is `{"outcome":
{"outcome": "selected", "optionId": ...}}`, or `{"outcome": {"outcome":
"cancelled"}}` — which the client MUST send for every pending request once it has
cancelled the prompt turn (ACP, prompt-turn § Cancellation).

- `allow-list` (the default): an `allow_once` option for a tool whose kind is in
  `AcpConfig.allow`, else a `reject_once` one (`decide`).
- `ask`: a tool whose kind is allowed is still granted at once; any other request
  is put to the room (`Turn.ask`, through the prompt's `PermissionDesk`), its
  options as one-word choices — `allow` (allow_once), `always` (allow_always),
  `never` (reject_always), `deny` (reject_once; last, so the question's deadline
  picks it) — and the agent is answered with the option picked. A request with no
  allow option, or one that comes while no prompt of the room runs, is decided by
  the allow-list.
"""

from __future__ import annotations

import logging
from typing import Any

from ._acp_session import Session
from ._permission_desk import PermissionRequest, shorten

__all__ = ["CHOICES", "answer_permission", "decide", "describe", "options_for"]

log = logging.getLogger("band_trio.adapters.acp")

CHOICES = {
    "allow_once": "allow",
    "allow_always": "always",
    "reject_always": "never",
    "reject_once": "deny",
}
"""The one-word choice put to the room for each kind of option (ACP `PermissionOptionKind`)."""

CANCELLED: dict[str, Any] = {"outcome": {"outcome": "cancelled"}}

ACTIONS = {
    "read": "read",
    "edit": "edit",
    "delete": "delete",
    "move": "move",
    "search": "search",
    "execute": "run",
    "think": "think with",
    "fetch": "fetch",
    "other": "use",
}
"""What the agent would do, by the tool call's `kind` (the verb of the question)."""


async def answer_permission(
    session: Session | None,
    params: dict[str, Any],
    allow: frozenset[str],
    *,
    asks: bool,
) -> dict[str, Any]:
    """The answer to one `session/request_permission` (see the module); waits for the
    room when the session's prompt asks it."""
    if session is None or session.cancelling:
        return CANCELLED
    kind = _kind(params)
    desk = session.desk
    options = options_for(params)
    if asks and desk is not None and kind not in allow and _any_allow(options):
        question = question_for(params, tuple(options))
        request = PermissionRequest(question, tuple(options))
        desk.submit(request)
        session.asked += 1
        choice = await request.wait()
        if choice is None or session.cancelling:
            log.info("room %s: the agent's %s request was cancelled", session.room_id, kind)
            return CANCELLED
        option = options[choice]
        verdict = "granted" if option[1].startswith("allow") else "denied"
        _count(session, verdict)
        log.info(
            "room %s: the room %s the agent's %s request (%s: %s)",
            session.room_id,
            verdict,
            kind,
            choice,
            describe(params),
        )
        if option[0] is None:  # no reject option offered: not run either way
            return CANCELLED
        return {"outcome": {"outcome": "selected", "optionId": option[0]}}
    answer, verdict = decide(params, allow)
    _count(session, verdict)
    what = describe(params)
    log.info("room %s: %s the agent's %s request (%s)", session.room_id, verdict, kind, what)
    return answer


def options_for(request: dict[str, Any]) -> dict[str, tuple[str | None, str]]:
    """The room's choices for a request, in the order asked, each with its option
    (`optionId`, kind): the agent's options that have a choice, then `deny` (its
    `reject_once`, else its `reject_always`, else no option: answered `cancelled`)."""
    found: dict[str, tuple[str | None, str]] = {}
    for option in request.get("options") or ():
        if not isinstance(option, dict) or not isinstance(option.get("optionId"), str):
            continue
        choice = CHOICES.get(str(option.get("kind")))
        if choice is not None and choice not in found:
            found[choice] = (option["optionId"], str(option["kind"]))
    deny = found.pop("deny", None) or found.pop("never", None) or (None, "reject_once")
    ordered: dict[str, tuple[str | None, str]] = {
        c: found[c] for c in ("allow", "always", "never") if c in found
    }
    ordered["deny"] = deny
    return ordered


def question_for(request: dict[str, Any], choices: tuple[str, ...]) -> str:
    """The question put to the room: what the agent would do, and what each choice means."""
    kind = _kind(request)
    tool = _tool(request)
    title = tool.get("title") if isinstance(tool.get("title"), str) else None
    action = ACTIONS.get(kind, "use")
    lines = [f"The coding agent asks to {action} ({kind}): {_detail(tool, title)}"]
    meaning = {
        "allow": "allow this once",
        "always": "allow it for the rest of this session",
        "never": "refuse it for the rest of this session",
        "deny": "refuse it this time",
    }
    lines.append("; ".join(f"{choice}: {meaning[choice]}" for choice in choices) + ".")
    return "\n".join(lines)


def decide(request: dict[str, Any], allow: frozenset[str]) -> tuple[dict[str, Any], str]:
    """The answer to a `session/request_permission` under the allow-list, and what it
    was: an `allow_once` option for a tool whose kind is allowed, else a `reject_once`
    one (`allow_always` and `reject_always` only if the agent offers nothing else)."""
    kind = _kind(request)
    options = [o for o in request.get("options") or () if isinstance(o, dict)]
    wanted = ("allow_once", "allow_always") if kind in allow else ("reject_once", "reject_always")
    for option_kind in wanted:
        for option in options:
            if option.get("kind") == option_kind and isinstance(option.get("optionId"), str):
                verdict = "granted" if kind in allow else "denied"
                outcome = {"outcome": "selected", "optionId": option["optionId"]}
                return {"outcome": outcome}, verdict
    # no option that says what the policy says: the tool call is not run either way
    return CANCELLED, "denied"


def describe(request: dict[str, Any]) -> str:
    """A tool call's title (or kind) on one line, for the log."""
    tool = _tool(request)
    for key in ("title", "kind", "toolCallId"):
        value = tool.get(key)
        if isinstance(value, str) and value:
            return " ".join(value.split())[:120]
    return "no detail"


def _tool(request: dict[str, Any]) -> dict[str, Any]:
    tool = request.get("toolCall")
    return tool if isinstance(tool, dict) else {}


def _kind(request: dict[str, Any]) -> str:
    kind = _tool(request).get("kind")
    return kind if isinstance(kind, str) else "other"


def _any_allow(options: dict[str, tuple[str | None, str]]) -> bool:
    return "allow" in options or "always" in options


def _detail(tool: dict[str, Any], title: str | None) -> str:
    """The title, with the command, URL or paths the call names (each shortened)."""
    parts = [shorten(title)] if title else []
    raw = tool.get("rawInput")
    if isinstance(raw, dict):
        for key in ("command", "cmd", "url", "filePath", "path"):
            value = raw.get(key)
            if isinstance(value, list):
                value = " ".join(map(str, value))
            if isinstance(value, str) and value.strip() and shorten(value) not in parts:
                parts.append(f"`{shorten(value)}`")
                break
    paths = [
        location["path"]
        for location in tool.get("locations") or ()
        if isinstance(location, dict) and isinstance(location.get("path"), str)
    ][:3]
    parts.extend(f"`{shorten(path)}`" for path in paths if f"`{shorten(path)}`" not in parts)
    return " — ".join(parts) if parts else "a tool call"


def _count(session: Session, verdict: str) -> None:
    if verdict == "granted":
        session.granted += 1
    else:
        session.denied += 1
