"""The routes through which people reach a running run: answer its question, steer it.

    POST /v1/runs/{id}/approval  {"choice", "request_id"?}
        200 {"object": "hermes.run.approval_response", "run_id", "choice", "request_id",
             "resolved": 1}
        400 invalid_approval_choice · invalid_approval_request   409 approval_not_pending
    POST /v1/runs/{id}/steer     {"text"} (or Hermes' "input" / "message")
        200 {"object": "hermes.run.steer", "run_id", "accepted": true}  + run.steered
        400 invalid_steer_input   409 run_not_accepting_steer
        413 steer_too_large       429 steer_queue_full (Retry-After: 1)

Payloads, codes and messages are Hermes' (NousResearch/hermes-agent
`gateway/platforms/api_server_runs.py` @ 005b4b7, `_handle_run_approval` and
`_handle_steer_run`), so its clients' checks hold. Where band-trio differs, on
purpose: the choices are the adapter's (`_approvals.pick` reads Hermes' words
onto a yes/no pair), so a choice is checked against the pending question — with
nothing pending the answer is 409 before the choice is read; and a run that
waits for an approval takes steering too (Hermes: `running` only).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..server import HttpError, answer_json
from ._approvals import NotPending, pick
from ._guidance import GuidanceFull
from ._run import Run

__all__ = ["approve", "steer"]

_MAX_REQUEST_ID = 256
"""Hermes' bound on a `request_id` (longer is 400 `invalid_approval_request`)."""


def _body(body: bytes) -> dict[str, Any]:
    try:
        value = msgspec.json.decode(body) if body.strip() else {}
    except (msgspec.DecodeError, RecursionError):
        raise HttpError(400, "invalid_request", "Invalid JSON") from None
    if not isinstance(value, dict):
        raise HttpError(400, "invalid_request", "Invalid JSON: the body must be a JSON object")
    return value


def _not_pending(run: Run) -> HttpError:
    return HttpError(409, "approval_not_pending", f"Run has no pending approval: {run.id}")


async def approve(run: Run, body: bytes, send: Any) -> None:
    """`POST /v1/runs/{id}/approval`: answer the run's pending question."""
    given = _body(body)
    raw_id = given.get("request_id")
    request_id = raw_id.strip() if isinstance(raw_id, str) else ""
    if raw_id is not None and not 0 < len(request_id) <= _MAX_REQUEST_ID:
        raise HttpError(400, "invalid_approval_request", "Approval request_id is invalid.")
    pending = run.approvals.pending if run.is_live else None
    if pending is None:
        raise _not_pending(run)
    raw_choice = given.get("choice")
    choices = pending.question.choices
    choice = pick(choices, raw_choice) if isinstance(raw_choice, str) else None
    if choice is None:
        raise HttpError(
            400,
            "invalid_approval_choice",
            "Invalid approval choice; expected one of: " + ", ".join(choices),
        )
    try:
        fields = run.approvals.answer(choice, request_id or None)
    except NotPending:
        raise _not_pending(run) from None
    await answer_json(
        send,
        200,
        {"object": "hermes.run.approval_response", "run_id": run.id, **fields},
    )


def _steer_text(given: dict[str, Any]) -> str:
    """Hermes reads `input`, then `message`, then `text`: the first that is set."""
    raw = given.get("input") or given.get("message") or given.get("text") or ""
    text = raw.strip() if isinstance(raw, str) else ""
    if not text:
        raise HttpError(
            400,
            "invalid_steer_input",
            "Missing non-empty steer text; expected 'input', 'message', or 'text'.",
        )
    return text


async def steer(run: Run, body: bytes, limits: tuple[int, int], send: Any) -> None:
    """`POST /v1/runs/{id}/steer`: offer guidance to a running (or waiting) run.
    `limits` is (messages waiting, characters each) from the policy."""
    if not run.steerable:
        raise HttpError(
            409,
            "run_not_accepting_steer",
            f"Run is not currently accepting steer input: {run.id}",
        )
    text = _steer_text(_body(body))
    waiting, chars = limits
    if len(text) > chars:
        raise HttpError(
            413,
            "steer_too_large",
            f"Steer text over {chars} characters",
            kind="invalid_request_error",
        )
    try:
        run.guidance.offer(text)
    except GuidanceFull:
        raise HttpError(
            429,
            "steer_queue_full",
            f"Run has {waiting} steer messages waiting to be taken",
            kind="rate_limit_error",
            headers=((b"retry-after", b"1"),),
        ) from None
    run.events.emit("run.steered", accepted=True)
    await answer_json(send, 200, {"object": "hermes.run.steer", "run_id": run.id, "accepted": True})
