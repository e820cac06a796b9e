"""A Copilot session's events and one run in it, fed as the CLI's reader hands them over."""

from __future__ import annotations

from typing import Any

from band_trio.adapters._copilot_errors import CopilotRpcError
from band_trio.adapters._copilot_guidance import refuses_immediate
from band_trio.adapters._copilot_session import Run, Session


def ev(kind: str, **data: Any) -> dict[str, Any]:
    return {"type": kind, "data": data}


def test_a_run_handed_over_whole_before_the_send_answer_is_read_still_ends() -> None:
    session = Session("s", "room", frozenset(), lambda method, params: True)
    run = session.run = Run(max_retries=2)
    for event in (
        ev("user.message", messageId="u1", content="hi"),
        ev("assistant.message", content="hello", originatingMessageId="u1"),
        ev("session.idle"),
    ):
        session.feed(event)
    assert not run.done  # not known yet which message is this run's
    run.message_id = "u1"  # session.send's answer, read after the events
    assert run.started and run.ended and not run.aborted
    assert run.text() == "hello"


def test_an_idle_before_the_runs_own_message_does_not_end_it() -> None:
    run = Run(max_retries=2)
    run.add("user.message", {"messageId": "old"})
    run.add("session.idle", {"aborted": True})  # the end of a run left over from before
    run.message_id = "u2"
    assert not run.done
    run.add("user.message", {"messageId": "u2"})
    run.add("assistant.message", {"content": "late", "originatingMessageId": "old"})
    run.add("assistant.message", {"content": "mine", "originatingMessageId": "u2"})
    run.add("session.idle", {"aborted": False})
    assert run.ended and run.text() == "mine"


def test_retries_past_the_limit_and_errors_of_its_message_fail_the_run() -> None:
    run = Run(max_retries=1)
    run.message_id = "u1"
    run.add("user.message", {"messageId": "u1"})
    run.add("assistant.turn_retry", {"reason": "api_error"})
    assert run.failure is None
    run.add("assistant.turn_retry", {"reason": "api_error"})
    assert run.failure and "2 retries, more than the 1 allowed" in run.failure
    other = Run(max_retries=5)
    other.message_id = "u9"
    other.add("session.error", {"message": "someone else's", "originatingMessageId": "u1"})
    assert other.failure is None
    other.add("session.error", {"message": "500 stub failure", "originatingMessageId": "u9"})
    assert other.failure == "Copilot failed the message: 500 stub failure"


def test_permissions_are_answered_at_once_denied_unless_their_kind_is_allowed() -> None:
    posted: list[dict[str, Any]] = []

    def post(method: str, params: dict[str, Any]) -> bool:
        assert method == "session.permissions.handlePendingPermissionRequest"
        posted.append(params)
        return True

    session = Session("s", "room", frozenset({"read"}), post)
    for request_id, kind in (("r1", "shell"), ("r2", "read"), ("r3", "url")):
        request = {"kind": kind, "fullCommandText": "rm -rf /", "path": "/etc/passwd"}
        session.feed(ev("permission.requested", requestId=request_id, permissionRequest=request))
    session.feed(ev("permission.requested", requestId="r4", permissionRequest={"kind": "shell"},
                    resolvedByHook=True))  # fmt: skip
    session.feed(ev("permission.requested", requestId=5, permissionRequest={}))  # malformed
    decisions = {p["requestId"]: p["result"]["kind"] for p in posted}
    assert decisions == {"r1": "reject", "r2": "approve-once", "r3": "reject"}
    assert all(p["sessionId"] == "s" for p in posted)
    assert (session.denied, session.granted) == (2, 1)


def test_a_sub_agents_events_are_not_the_sessions_answer() -> None:
    session = Session("s", "room", frozenset(), lambda method, params: True)
    run = session.run = Run(max_retries=2)
    run.message_id = "u1"
    session.feed(ev("user.message", messageId="u1"))
    sub = {"type": "session.idle", "agentId": "task-1", "data": {}}
    session.feed(sub)
    assert not run.ended and session.busy


def test_a_peer_that_floods_a_run_with_messages_cannot_grow_it_without_bound() -> None:
    run = Run(max_retries=2, memory=64)
    run.message_id = "u0"
    run.add("user.message", {"messageId": "u0"})
    for i in range(1, 10_000):
        run.add("user.message", {"messageId": f"u{i}"})
        run.add("session.error", {"message": "x", "originatingMessageId": f"u{i}"})
        run.add("session.idle", {})
    assert len(run._users) <= 64 and len(run._ended) <= 64 and len(run._errors) <= 64


def test_a_run_with_guidance_ends_once_the_cli_went_idle_after_the_guidance_too() -> None:
    run = Run(max_retries=2)
    run.message_id = "u1"
    run.add("user.message", {"messageId": "u1"})
    run.sending += 1  # taken, `session.send` not yet answered
    run.add("assistant.message", {"content": "first", "originatingMessageId": "u1"})
    run.add("session.idle", {})  # the prompt's run ended before the guidance came
    assert not run.ended
    run.guided("g1")
    assert not run.ended and run.sending == 0
    run.add("user.message", {"messageId": "g1"})  # taken up as queued: a run of its own
    run.add("assistant.message", {"content": "second", "originatingMessageId": "g1"})
    run.add("assistant.message", {"content": "not ours", "originatingMessageId": "x"})
    assert not run.ended
    run.add("session.idle", {})
    assert run.ended and not run.aborted
    assert run.text() == "first\n\nsecond"


def test_an_error_of_the_guidance_fails_the_run_and_an_abort_of_it_marks_it_aborted() -> None:
    run = Run(max_retries=2)
    run.message_id = "u1"
    run.guided("g1")
    run.add("user.message", {"messageId": "u1"})
    run.add("user.message", {"messageId": "g1"})
    run.add("session.error", {"message": "boom", "originatingMessageId": "g1"})
    run.add("session.idle", {"aborted": True})
    assert run.failure == "Copilot failed the message: boom"
    assert run.ended and run.aborted


def test_a_run_takes_guidance_while_its_messages_stay_among_those_remembered() -> None:
    run = Run(max_retries=2, memory=8)
    run.message_id = "u1"
    for i in range(3):
        assert run.takes_guidance
        run.guided(f"g{i}")
    run.sending = 1
    assert not run.takes_guidance  # 4 of 8: the rest run as turns of their own


def test_the_cli_refuses_immediate_mode_by_invalid_params_or_an_error_naming_it() -> None:
    def refusal(code: int, message: str) -> bool:
        return refuses_immediate(CopilotRpcError("session.send", code, message))

    assert refusal(-32602, "Invalid params")
    assert refusal(-32603, "Unrecognized key(s) in object: 'mode'")
    assert refusal(-32000, "Invalid enum value. Expected 'enqueue', received 'immediate'")
    assert not refusal(-32603, "session not found")
    assert not refusal(-32000, "model gpt-4o is not available")  # "model" is not "mode"
