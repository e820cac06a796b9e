"""The sans-IO wire layer: frames and payload schemas, as strict as band-sdk's validator."""

from __future__ import annotations

import msgspec
import pytest

from band_trio import wire


def control(**overrides: object) -> bytes:
    payload: dict[str, object] = {
        "mode": "interrupt",
        "scope": "room",
        "agent_id": "A",
        "correlation_id": "c1",
        "execution_id": None,
        "room_id": "R",
    }
    payload.update(overrides)
    return msgspec.json.encode({k: v for k, v in payload.items() if v is not ...})


def test_frame_round_trip_keeps_refs_as_strings() -> None:
    text = wire.encode_frame("1", "2", "chat_room:R", "phx_join", {})
    frame = wire.decode_frame(text)
    assert (frame.join_ref, frame.ref, frame.topic, frame.event) == (
        "1",
        "2",
        "chat_room:R",
        "phx_join",
    )
    assert bytes(frame.payload) == b"{}"


def test_numeric_refs_become_strings_and_non_object_payloads_become_empty() -> None:
    frame = wire.decode_frame('[3, 7, "phoenix", "phx_reply", [1, 2]]')
    assert (frame.join_ref, frame.ref) == ("3", "7")
    assert bytes(frame.payload) == b"{}"


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "{}",
        '["1", "1", "t", "e"]',
        '["1", "1", "t", "e", {}, 6]',
        '["1", "1", "", "e", {}]',
        '["1", "1", "t", "", {}]',
        '["1", "1", 5, "e", {}]',
        '[true, "1", "t", "e", {}]',
    ],
)
def test_malformed_frames_raise_frame_error(text: str) -> None:
    with pytest.raises(wire.FrameError):
        wire.decode_frame(text)


def test_agent_control_accepts_the_documented_shape() -> None:
    signal = wire.decode_payload("agent.control", control(reason="user_requested"))
    assert isinstance(signal, wire.AgentControl)
    assert (signal.mode, signal.room_id, signal.reason) == ("interrupt", "R", "user_requested")


@pytest.mark.parametrize(
    "overrides",
    [
        {"reason": None},  # "no null": may be absent, never null
        {"type": None},
        {"correlation_id": None},
        {"correlation_id": ...},  # the key is required
        {"room_id": ...},  # required key, null allowed
        {"execution_id": ...},
        {"mode": "pause"},
        {"scope": "world"},
    ],
)
def test_agent_control_rejects_what_band_sdk_rejects(overrides: dict[str, object]) -> None:
    with pytest.raises(wire.PayloadError) as caught:
        wire.decode_payload("agent.control", control(**overrides))
    assert caught.value.event == "agent.control"


def test_participant_handle_may_be_absent_but_not_null() -> None:
    ok = wire.decode_payload("participant_added", b'{"id": "U", "type": "User", "name": "Al"}')
    assert isinstance(ok, wire.ParticipantAdded)
    with pytest.raises(wire.PayloadError):
        wire.decode_payload(
            "participant_added", b'{"id": "U", "type": "User", "name": "Al", "handle": null}'
        )


def test_message_created_requires_its_fields_and_keeps_extras_out_of_the_way() -> None:
    base = {
        "id": "M",
        "content": "hi",
        "message_type": "text",
        "sender_type": "User",
        "sender_id": "U",
        "inserted_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
        "something_new": {"x": 1},
        "metadata": {"mentions": [{"id": "A", "handle": None}]},
    }
    message = wire.decode_payload("message_created", msgspec.json.encode(base))
    assert isinstance(message, wire.MessageCreated)
    assert message.metadata is not None and message.metadata.mentions is not None
    del base["sender_id"]
    with pytest.raises(wire.PayloadError):
        wire.decode_payload("message_created", msgspec.json.encode(base))


def test_supersede_retryable_defaults_to_absent() -> None:
    push = wire.decode_payload("supersede", b'{"reason": "superseded", "message": "bye"}')
    assert isinstance(push, wire.Supersede) and not push.retryable


def test_encoding_omits_no_null_fields_but_keeps_required_nulls() -> None:
    payload = wire.AgentControl(
        mode="stop",
        scope="agent",
        agent_id="A",
        correlation_id="c",
        execution_id=None,
        room_id=None,
    )
    encoded = msgspec.json.decode(msgspec.json.encode(payload))
    assert encoded["room_id"] is None and encoded["execution_id"] is None
    assert "reason" not in encoded and "type" not in encoded


def test_channels_accept_only_pushes_of_the_current_join() -> None:
    refs = wire.RefCounter()
    channels = wire.Channels(refs)
    ref, text = channels.join_frame("chat_room:R")
    assert msgspec.json.decode(text) == [ref, ref, "chat_room:R", "phx_join", {}]
    push = wire.Frame(ref, None, "chat_room:R", "message_created", msgspec.Raw(b"{}"))
    assert not channels.is_current(push)  # not acknowledged yet
    channels.joined("chat_room:R", ref)
    assert channels.is_current(push)
    rejoin_ref, _ = channels.join_frame("chat_room:R")
    channels.joined("chat_room:R", rejoin_ref)
    assert not channels.is_current(push)  # a stale join_ref
    assert not channels.is_current(wire.Frame(None, None, "chat_room:R", "x", msgspec.Raw(b"{}")))
    leave = channels.leave_frame("chat_room:R")
    assert leave is not None and msgspec.json.decode(leave[1])[0] == rejoin_ref
    assert channels.leave_frame("chat_room:R") is None


def test_refs_are_never_reused_across_connections() -> None:
    refs = wire.RefCounter()
    first = wire.Channels(refs).heartbeat_frame()[0]
    second = wire.Channels(refs).heartbeat_frame()[0]
    assert int(second) > int(first)
