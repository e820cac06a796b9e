"""Malformed input: property-based fuzzing of the frame decoder, the payload schemas and
the link's per-frame entry point (`Socket._on_text`).

Arbitrary bytes and near-valid frames never raise past the link; each one is either
delivered, or counted once and logged once with its event name (the field rules are
in `band_trio.wire._events`).
The schema rules are restated here as an independent model (`SCHEMAS`), not read from
the msgspec structs, so a drift of either side from band-sdk's rules fails these tests.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast

import msgspec
import pytest
import trio_websocket
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from band_trio.link._socket import Socket, SocketStats
from band_trio.policy import Policy
from band_trio.runtime.parts import Pages
from band_trio.wire import (
    EVENT_TYPES,
    ActivityReport,
    ContextMeta,
    Frame,
    FrameError,
    MessagePage,
    PayloadError,
    RefCounter,
    decode_frame,
    decode_payload,
)
from seed_rotation import examples

SETTINGS = settings(
    max_examples=examples(300),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
"""The run's share of the examples, drawn from the seed day's seed (tests/conftest.py):
the sample is the same all day (a failure reruns), another the next."""

# -- JSON values -----------------------------------------------------------------------

json_scalars: st.SearchStrategy[Any] = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values: st.SearchStrategy[Any] = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
json_non_objects: st.SearchStrategy[Any] = json_values.filter(lambda v: not isinstance(v, dict))
# Text including lone surrogates, which no UTF-8 decoder produces but a `str` can hold.
any_text: st.SearchStrategy[str] = st.text(max_size=80) | st.lists(
    st.text(max_size=10) | st.characters(categories=["Cs"]), max_size=8
).map("".join)


def dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


# -- 1. decode_frame: a Frame or FrameError, nothing else --------------------------------


def check_frame_contract(data: str | bytes) -> Frame | None:
    try:
        frame = decode_frame(data)
    except FrameError:
        return None
    assert isinstance(frame, Frame)
    assert isinstance(frame.topic, str)
    assert frame.topic
    assert isinstance(frame.event, str)
    assert frame.event
    assert frame.join_ref is None or isinstance(frame.join_ref, str)
    assert frame.ref is None or isinstance(frame.ref, str)
    assert isinstance(frame.payload, msgspec.Raw)
    assert bytes(frame.payload).lstrip()[:1] == b"{", "a non-object payload must become {}"
    return frame


frame_elements: st.SearchStrategy[Any] = (
    json_values
    | st.sampled_from(["1", "2", "chat_room:R", "phoenix", "message_created", "phx_reply", ""])
    | st.integers(min_value=-5, max_value=5)
)
framelike_bytes: st.SearchStrategy[bytes] = st.lists(frame_elements, min_size=3, max_size=7).map(
    dumps
)


@SETTINGS
@given(st.binary(max_size=200) | framelike_bytes)
def test_decode_frame_on_arbitrary_bytes_returns_a_frame_or_raises_frame_error(data: bytes) -> None:
    check_frame_contract(data)


@SETTINGS
@given(any_text | framelike_bytes.map(lambda b: b.decode()))
def test_decode_frame_on_arbitrary_text_returns_a_frame_or_raises_frame_error(data: str) -> None:
    check_frame_contract(data)


@pytest.mark.parametrize(
    "text",
    [
        "\ud800",
        '["1", "1", "chat_room:\udc80", "message_created", {}]',
        '["1","1","t","e",{}]\udfff',
    ],
)
def test_text_with_lone_surrogates_is_a_frame_error(text: str) -> None:
    with pytest.raises(FrameError):
        decode_frame(text)


# -- 2. decode_payload: an instance of the event's type or PayloadError naming it ---------


def decode_or_error(event: str, raw: bytes | msgspec.Raw) -> Any:
    """The decoded payload or the `PayloadError`; any other exception propagates."""
    try:
        return decode_payload(event, raw)
    except PayloadError as exc:
        return exc


def check_payload_contract(event: str, raw: bytes | msgspec.Raw) -> bool:
    """True if accepted. Anything but the event's type or its PayloadError fails the test."""
    value = decode_or_error(event, raw)
    if isinstance(value, PayloadError):
        assert value.event == event
        assert event in str(value)
        return False
    assert type(value) is EVENT_TYPES[event]
    return True


EVENTS = sorted(EVENT_TYPES)


@SETTINGS
@given(st.sampled_from(EVENTS), st.binary(max_size=200), st.booleans())
def test_decode_payload_on_arbitrary_bytes(event: str, raw: bytes, as_raw: bool) -> None:
    check_payload_contract(event, msgspec.Raw(raw) if as_raw else raw)


@SETTINGS
@given(st.sampled_from(EVENTS), json_values)
def test_decode_payload_on_arbitrary_json(event: str, value: Any) -> None:
    accepted = check_payload_contract(event, dumps(value))
    if not isinstance(value, dict):
        assert not accepted, "a non-object payload is never valid"


def keys_of(event: str) -> list[str]:
    return [field.name for field in SCHEMAS[event]]


@SETTINGS
@given(st.data())
def test_decode_payload_on_objects_with_schema_keys(data: st.DataObject) -> None:
    """Arbitrary values under the schema's own keys reach the per-field validation."""
    event = data.draw(st.sampled_from(EVENTS))
    keys = st.sampled_from(keys_of(event)) | st.text(max_size=6)
    value = data.draw(st.dictionaries(keys, json_values | json_scalars, max_size=10))
    check_payload_contract(event, dumps(value))


# -- 3. the strict schemas, restated from band-sdk 6.0.1's validator ---------------------

Rule = Literal["req", "key_req_null_ok", "null_ok", "no_null"]
"""req: present, non-null. key_req_null_ok: present, may be null. null_ok: may be null or
absent. no_null: may be absent, never null."""

ACCEPTS_ABSENT: frozenset[Rule] = frozenset({"null_ok", "no_null"})
ACCEPTS_NULL: frozenset[Rule] = frozenset({"null_ok", "key_req_null_ok"})


@dataclass(frozen=True)
class Field:
    name: str
    rule: Rule
    valid: st.SearchStrategy[Any]
    wrong: st.SearchStrategy[Any]
    scalar: bool = True  # decoded as-is, so the decoded attribute equals the JSON value


_ints = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_floats = st.floats(allow_nan=False, allow_infinity=False)
_objects = st.dictionaries(st.text(max_size=5), json_scalars, max_size=3)
_arrays = st.lists(json_scalars, max_size=3)

STR = st.text(max_size=12)
NOT_STR = st.booleans() | _ints | _floats | _arrays | _objects
BOOL = st.booleans()
NOT_BOOL = _ints | _floats | STR | _arrays | _objects
INT = _ints
NOT_INT = st.booleans() | _floats | STR | _arrays | _objects
NOT_OBJ = st.booleans() | _ints | STR | _arrays
NOT_ARR = st.booleans() | _ints | STR | _objects


def enum(*values: str) -> tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]:
    return st.sampled_from(values), STR.filter(lambda s: s not in values) | NOT_STR


def text(name: str, rule: Rule) -> Field:
    return Field(name, rule, STR, NOT_STR)


_mention = st.fixed_dictionaries(
    {"id": STR},
    optional={k: STR | st.none() for k in ("username", "handle", "name")},
)
METADATA = st.fixed_dictionaries(
    {},
    optional={
        "mentions": st.lists(_mention, max_size=3) | st.none(),
        "status": STR,
        "delivery_status": st.dictionaries(STR, _objects, max_size=2) | st.none(),
    },
)

_MESSAGE = [
    *(
        text(n, "req")
        for n in (
            "id",
            "content",
            "message_type",
            "sender_type",
            "sender_id",
            "inserted_at",
            "updated_at",
        )
    ),
    Field("metadata", "null_ok", METADATA, NOT_OBJ, scalar=False),
    text("sender_name", "null_ok"),
    text("chat_room_id", "null_ok"),
    text("thread_id", "null_ok"),
    Field("attachments", "null_ok", _arrays, NOT_ARR),
]
_ROOM = [
    text("id", "req"),
    text("inserted_at", "req"),
    text("updated_at", "req"),
    text("title", "null_ok"),
    text("task_id", "null_ok"),
]
_PARTICIPANT_REMOVED = [
    text("id", "req"),
    text("type", "req"),
    text("name", "req"),
    text("handle", "no_null"),
]
_PARTICIPANT_ADDED = [
    *_PARTICIPANT_REMOVED,
    text("description", "null_ok"),
    Field("is_remote", "null_ok", BOOL, NOT_BOOL),
    Field("is_external", "null_ok", BOOL, NOT_BOOL),
]
_CONTROL = [
    Field("mode", "req", *enum("interrupt", "stop", "play")),
    Field("scope", "req", *enum("agent", "room")),
    text("agent_id", "req"),
    text("correlation_id", "req"),
    text("execution_id", "key_req_null_ok"),
    text("room_id", "key_req_null_ok"),
    text("reason", "no_null"),
    text("type", "no_null"),
]
_SUPERSEDE = [
    text("reason", "req"),
    text("message", "req"),
    text("correlation_id", "null_ok"),
    Field("retryable", "null_ok", BOOL, NOT_BOOL),
    Field("retry_after", "null_ok", INT, NOT_INT),
    text("target_socket_id", "null_ok"),
]
# Not an event: Phoenix's own reply, `{"status": str, "response": object}`.
_REPLY = [text("status", "req"), Field("response", "no_null", _objects, NOT_OBJ, scalar=False)]

SCHEMAS: dict[str, list[Field]] = {
    "message_created": _MESSAGE,
    "message_updated": _MESSAGE,
    "room_added": _ROOM,
    "room_removed": _ROOM,
    "room_deleted": [text("id", "req")],
    "participant_added": _PARTICIPANT_ADDED,
    "participant_removed": _PARTICIPANT_REMOVED,
    "agent.control": _CONTROL,
    "supersede": _SUPERSEDE,
    "phx_reply": _REPLY,
}


def test_every_event_type_has_a_model_here() -> None:
    assert set(SCHEMAS) == set(EVENT_TYPES)


@st.composite
def valid_payloads(draw: st.DrawFn, event: str) -> dict[str, Any]:
    payload: dict[str, Any] = {}
    for field in SCHEMAS[event]:
        if field.rule in ACCEPTS_ABSENT and draw(st.booleans()):
            continue
        nullable = field.rule in ACCEPTS_NULL
        payload[field.name] = draw(field.valid | st.none()) if nullable else draw(field.valid)
    return payload


Mutation = Literal[
    "none", "extra", "drop", "null", "wrong", "not_object", "truncate", "bad_utf8", "metadata"
]
MUTATIONS: list[Mutation] = [
    "none",
    "extra",
    "drop",
    "null",
    "wrong",
    "not_object",
    "truncate",
    "bad_utf8",
    "metadata",
]


@dataclass(frozen=True)
class Case:
    event: str
    raw: bytes
    valid: bool
    value: Any  # the JSON value before encoding (None for byte-level mutations)
    why: str
    parses: bool = True  # False if `raw` is not even JSON text (a truncated payload)


@st.composite
def payload_cases(draw: st.DrawFn, events: list[str] | None = None) -> Case:
    """A valid payload of a known event, possibly mutated, with the spec's verdict on it."""
    event = draw(st.sampled_from(events or EVENTS))
    fields = SCHEMAS[event]
    payload = draw(valid_payloads(event))
    mutation = draw(st.sampled_from(MUTATIONS))
    if mutation == "extra":
        names = {f.name for f in fields}
        key = draw(st.text(max_size=8).filter(lambda k: k not in names))
        payload[key] = draw(json_values)
        return Case(event, dumps(payload), True, payload, f"extra key {key!r}")
    if mutation in ("drop", "null", "wrong"):
        field = draw(st.sampled_from(fields))
        if mutation == "drop":
            payload.pop(field.name, None)
            valid = field.rule in ACCEPTS_ABSENT
        elif mutation == "null":
            payload[field.name] = None
            valid = field.rule in ACCEPTS_NULL
        else:
            payload[field.name] = draw(field.wrong)
            valid = False
        return Case(event, dumps(payload), valid, payload, f"{mutation} {field.name}")
    if mutation == "not_object":
        value = draw(json_non_objects)
        return Case(event, dumps(value), False, value, "not an object")
    if mutation == "truncate":
        raw = dumps(payload)
        cut = draw(st.integers(min_value=0, max_value=len(raw) - 1))
        return Case(event, raw[:cut], False, None, f"truncated at {cut}", parses=False)
    if mutation == "bad_utf8":
        # A required string field whose value is not UTF-8.
        field = next(f for f in fields if f.rule == "req" and f.valid is STR)
        payload.pop(field.name)
        rest = dumps(payload)[1:]
        sep = b"" if rest == b"}" else b", "
        raw = b'{"%s": "\xff"%s%s' % (field.name.encode(), sep, rest)
        return Case(event, raw, False, None, f"invalid UTF-8 in {field.name}")
    if mutation == "metadata" and event in ("message_created", "message_updated"):
        broken = draw(
            st.sampled_from(["mentions_not_array", "mention_without_id", "status_null", "extra"])
        )
        metadata = dict(payload.get("metadata") or {})
        if broken == "mentions_not_array":
            metadata["mentions"] = draw(NOT_ARR)
        elif broken == "mention_without_id":
            metadata["mentions"] = [{"username": draw(STR)}]
        elif broken == "status_null":
            metadata["status"] = None  # "metadata.status str": no null
        else:
            metadata[draw(st.sampled_from(["x", "colour", "delivery"]))] = draw(json_values)
        payload["metadata"] = metadata
        return Case(event, dumps(payload), broken == "extra", payload, f"metadata {broken}")
    return Case(event, dumps(payload), True, payload, "valid")


def check_case(case: Case) -> None:
    decoded = decode_or_error(case.event, case.raw)
    if isinstance(decoded, PayloadError):
        assert not case.valid, f"{case.why}: rejected but the spec accepts it: {decoded}"
        assert decoded.event == case.event
        assert case.event in str(decoded)
        return
    assert case.valid, f"{case.why}: accepted but the spec rejects it: {case.raw!r}"
    assert type(decoded) is EVENT_TYPES[case.event]
    assert isinstance(case.value, dict)
    for field in SCHEMAS[case.event]:
        if field.scalar and field.name in case.value:
            assert getattr(decoded, field.name) == case.value[field.name], field.name


FOCUS = ["message_created", "agent.control", "supersede", "room_added", "participant_added"]


@settings(SETTINGS, max_examples=examples(500))
@given(payload_cases(FOCUS))
def test_near_valid_payloads_follow_the_strict_schema(case: Case) -> None:
    check_case(case)


@SETTINGS
@given(payload_cases())
def test_near_valid_payloads_of_every_event_follow_the_strict_schema(case: Case) -> None:
    check_case(case)


CONTROL = {
    "mode": "interrupt",
    "scope": "room",
    "agent_id": "A",
    "correlation_id": "c1",
    "execution_id": None,
    "room_id": "R",
}
PARTICIPANT = {"id": "P", "type": "User", "name": "Alice"}


@pytest.mark.parametrize(
    ("event", "payload", "valid"),
    [
        ("agent.control", CONTROL, True),
        ("agent.control", {**CONTROL, "surprise": [1, {"x": None}]}, True),
        ("agent.control", {**CONTROL, "reason": None}, False),
        ("agent.control", {**CONTROL, "type": None}, False),
        ("agent.control", {**CONTROL, "reason": "user"}, True),
        ("agent.control", {**CONTROL, "room_id": None}, True),
        ("agent.control", {k: v for k, v in CONTROL.items() if k != "room_id"}, False),
        ("agent.control", {k: v for k, v in CONTROL.items() if k != "execution_id"}, False),
        ("agent.control", {k: v for k, v in CONTROL.items() if k != "correlation_id"}, False),
        ("agent.control", {**CONTROL, "correlation_id": None}, False),
        ("agent.control", {**CONTROL, "mode": "pause"}, False),
        ("participant_added", PARTICIPANT, True),
        ("participant_added", {**PARTICIPANT, "handle": None}, False),
        ("participant_added", {**PARTICIPANT, "handle": "alice"}, True),
        ("participant_added", {**PARTICIPANT, "is_remote": None}, True),
        ("participant_removed", {**PARTICIPANT, "handle": None}, False),
        ("supersede", {"reason": "r", "message": "m", "retry_after": 3.0}, False),
        ("supersede", {"reason": "r", "message": "m", "retry_after": None}, True),
        ("room_added", {"id": "R", "inserted_at": "t", "updated_at": "t", "title": None}, True),
    ],
)
def test_named_strictness_rules(event: str, payload: dict[str, Any], valid: bool) -> None:
    check_case(Case(event, dumps(payload), valid, payload, f"{event} {payload}"))


# -- 4. the link: Socket._on_text never raises, and accounts for every input once ---------

TOPIC = "chat_room:R"
JOIN_REF = "1"
LOGGER = "band_trio.link.socket"

Outcome = tuple[str, str | None]
"""("push", event) | ("bad_frame", None) | ("bad_payload", event) | ("stale", event) |
("ignored", event) | ("reply", None)."""


def expected_outcome(
    join_ref: Any, ref: Any, topic: Any, event: Any, payload_valid: bool | None
) -> Outcome:
    """The spec's routing of one frame whose JSON parsed into these five elements.

    `payload_valid` None means: not known by construction (ask the schema decoder).
    """

    def ref_ok(value: Any) -> bool:
        return value is None or isinstance(value, str) or type(value) is int

    if not (ref_ok(join_ref) and ref_ok(ref)):
        return ("bad_frame", None)
    if not (isinstance(topic, str) and topic and isinstance(event, str) and event):
        return ("bad_frame", None)
    if event == "phx_reply":
        return ("reply", None) if payload_valid else ("bad_payload", event)
    current = topic == TOPIC and join_ref is not None and str(join_ref) == JOIN_REF
    if not current:
        return ("stale", event)
    if event not in EVENT_TYPES:
        return ("ignored", event)
    return ("push", event) if payload_valid else ("bad_payload", event)


@dataclass(frozen=True)
class Input:
    data: str | bytes
    expected: Outcome | None  # None: arbitrary input, judged against decode_frame


def encode_frame_bytes(elements: list[bytes]) -> bytes:
    return b"[" + b", ".join(elements) + b"]"


@st.composite
def frame_inputs(draw: st.DrawFn) -> Input:
    """A frame built from parts (near-valid or not), with the outcome the spec gives it."""

    def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> Any:
        return draw(good if draw(st.integers(0, 9)) < 8 else bad)

    if draw(st.booleans()):  # the joined topic under its current join_ref
        join_ref: Any = draw(st.sampled_from([JOIN_REF, int(JOIN_REF)]))
        topic: Any = TOPIC
    else:
        join_ref = mostly(
            st.sampled_from([None, "2", 2, "", JOIN_REF]) | st.text(max_size=4),
            st.sampled_from([1.0, True, [JOIN_REF], {}]),
        )
        topic = mostly(
            st.sampled_from([TOPIC, "chat_room:S", "agent_control:A", "phoenix"])
            | st.text(min_size=1, max_size=8),
            st.sampled_from(["", None, 5, ["t"]]),
        )
    ref: Any = mostly(st.sampled_from([None, "7", 7, -3]), st.sampled_from([2.5, False, {}]))
    event: Any = mostly(
        st.sampled_from(EVENTS),
        st.sampled_from(["phx_error", "presence_diff", "", None, 3]) | st.text(max_size=8),
    )
    parses = True
    if isinstance(event, str) and event in EVENT_TYPES and draw(st.integers(0, 3)):
        case = draw(payload_cases([event]))
        payload_raw = case.raw
        # A non-object payload is read as {}, which no schema accepts: still invalid.
        payload_valid: bool | None = case.valid
        parses = case.parses
    else:
        value = draw(json_values)
        payload_raw = dumps(value)
        payload_valid = False if not isinstance(value, dict) else None
    elements = [dumps(join_ref), dumps(ref), dumps(topic), dumps(event), payload_raw]
    shape = mostly(st.just("ok"), st.sampled_from(["short", "long", "object", "cut", "topic_utf8"]))
    if shape == "short":
        return Input(encode_frame_bytes(elements[:4]), ("bad_frame", None))
    if shape == "long":
        return Input(encode_frame_bytes([*elements, b"6"]), ("bad_frame", None))
    if shape == "object":  # a V1 frame
        v1 = b'{"topic": %s, "event": %s, "payload": {}, "ref": null}' % (elements[2], elements[3])
        return Input(v1, ("bad_frame", None))
    data = encode_frame_bytes(elements)
    if shape == "cut":
        cut = draw(st.integers(min_value=0, max_value=len(data) - 1))
        return Input(data[:cut], ("bad_frame", None))
    if shape == "topic_utf8":
        return Input(encode_frame_bytes([*elements[:2], b'"chat_room:\xff"', *elements[3:]]), None)
    if not parses:  # a truncated payload leaves the frame's array unclosed
        return Input(data, ("bad_frame", None))
    if payload_valid is None:
        if not isinstance(event, str) or not event or event not in EVENT_TYPES:
            payload_valid = False
        else:
            payload_valid = check_payload_contract(event, payload_raw)
    expected = expected_outcome(join_ref, ref, topic, event, payload_valid)
    if draw(st.booleans()):  # as a text message rather than a binary one
        try:
            return Input(data.decode(), expected)
        except UnicodeDecodeError:
            # Surrogate-escaped text is not UTF-8: never a frame.
            return Input(data.decode("utf-8", "surrogateescape"), ("bad_frame", None))
    return Input(data, expected)


arbitrary_inputs: st.SearchStrategy[Input] = (
    st.binary(max_size=120) | any_text | framelike_bytes
).map(lambda data: Input(data, None))
link_inputs = st.lists(
    st.integers(0, 3).flatmap(lambda n: frame_inputs() if n else arbitrary_inputs),
    min_size=1,
    max_size=6,
)


def judge_arbitrary(data: str | bytes) -> Outcome:
    """The outcome for an input not built by `frame_inputs`, from the decoders themselves."""
    frame = check_frame_contract(data)
    if frame is None:
        return ("bad_frame", None)
    known = frame.event in EVENT_TYPES
    valid = known and check_payload_contract(frame.event, frame.payload)
    return expected_outcome(frame.join_ref, frame.ref, frame.topic, frame.event, valid)


class _NoWebSocket:
    """Stands in for the websocket: `_on_text` never touches it."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the reader touched the websocket: {name}")


@dataclass
class Probe:
    socket: Socket
    pushes: list[tuple[str, str, Any]]


def make_socket() -> Probe:
    pushes: list[tuple[str, str, Any]] = []
    socket = Socket(
        cast(trio_websocket.WebSocketConnection, _NoWebSocket()),
        refs=RefCounter(),
        policy=Policy(),
        on_push=lambda topic, event, payload: pushes.append((topic, event, payload)),
        stats=SocketStats(),
    )
    socket.channels.joined(TOPIC, JOIN_REF)
    return Probe(socket, pushes)


def observed_outcomes(before: SocketStats, after: SocketStats, pushes: list[Any]) -> list[Outcome]:
    outcomes: list[Outcome] = [("push", event) for _, event, _ in pushes]
    outcomes += [("bad_frame", None)] * (after.bad_frames - before.bad_frames)
    outcomes += [("stale", None)] * (after.stale_pushes - before.stale_pushes)
    for event, n in (after.bad_payloads - before.bad_payloads).items():
        outcomes += [("bad_payload", event)] * n
    for event, n in (after.ignored_events - before.ignored_events).items():
        outcomes += [("ignored", event)] * n
    return outcomes


def copy_stats(stats: SocketStats) -> SocketStats:
    return SocketStats(
        frames_in=stats.frames_in,
        bad_frames=stats.bad_frames,
        bad_payloads=Counter(stats.bad_payloads),
        stale_pushes=stats.stale_pushes,
        ignored_events=Counter(stats.ignored_events),
    )


EXPECTED_LOG: dict[str, int | None] = {
    "push": None,
    "reply": None,
    "bad_frame": logging.WARNING,
    "bad_payload": logging.ERROR,
    "stale": logging.DEBUG,
    "ignored": logging.DEBUG,
}


def feed_and_check(probe: Probe, item: Input, caplog: pytest.LogCaptureFixture) -> Outcome:
    expected = item.expected if item.expected is not None else judge_arbitrary(item.data)
    before = copy_stats(probe.socket.stats)
    probe.pushes.clear()
    caplog.clear()

    probe.socket._on_text(item.data)  # must not raise, whatever the input

    after = probe.socket.stats
    assert after.frames_in == before.frames_in + 1
    observed = observed_outcomes(before, after, probe.pushes)
    kind, event = expected
    if kind == "reply":
        assert observed == [], item
    elif kind == "stale":
        assert observed == [("stale", None)], item
    else:
        assert observed == [expected], item
    if kind == "push":
        topic, pushed_event, payload = probe.pushes[0]
        assert (topic, pushed_event) == (TOPIC, event)
        assert type(payload) is EVENT_TYPES[pushed_event]

    records = [r for r in caplog.records if r.name == LOGGER]
    level = EXPECTED_LOG[kind]
    if level is None:
        assert records == [], item
    else:
        assert [r.levelno for r in records] == [level], item
        if event is not None:
            assert event in records[0].getMessage(), item
    return expected


def _corpus() -> list[Input]:
    """One input per branch of the reader, and an unreadable payload of every event.

    Fed before the generated inputs: which branches a sample reaches changes with the
    day's seed and with what else the session imported (Hypothesis mixes string
    constants of loaded modules into its draws; seen here: a sample with no
    `phx_reply` at all), so the accounting of each branch must not depend on the
    sample alone.
    """
    corpus = [
        Input(b"not json", ("bad_frame", None)),
        Input('["1","7","chat_room:R","phx_reply",{"status":"ok","response":{}}]', ("reply", None)),
        Input('["9",null,"chat_room:R","message_created",{}]', ("stale", "message_created")),
        Input('["1",null,"chat_room:R","presence_diff",{}]', ("ignored", "presence_diff")),
    ]
    for event in EVENTS:
        ref = '"7"' if event == "phx_reply" else "null"
        frame = f'["1",{ref},"chat_room:R","{event}",[]]'
        corpus.append(Input(frame, ("bad_payload", event)))
    return corpus


async def test_on_text_never_raises_and_accounts_for_each_input_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    seen: Counter[Outcome] = Counter()
    probe = make_socket()
    for item in _corpus():
        seen[feed_and_check(probe, item, caplog)] += 1

    # Nested so that every example runs inside this trio run (Socket needs a clock) and
    # caplog is shared on purpose: it is cleared before each input.
    @settings(SETTINGS, max_examples=examples(400))
    @given(link_inputs)
    def check(items: list[Input]) -> None:
        probe = make_socket()
        for item in items:
            seen[feed_and_check(probe, item, caplog)] += 1

    check()
    assert {kind for kind, _ in seen} == set(EXPECTED_LOG), seen
    assert {event for kind, event in seen if kind == "bad_payload"} == set(EVENT_TYPES), seen
    # valid pushes of every event are the next test's subject; here it is enough that the
    # mix reaches them (Hypothesis draws constants from the loaded modules, so how many
    # it makes changes with what the test session imported)
    assert sum(n for (kind, _), n in seen.items() if kind == "push") >= 1, seen


PUSHED = [e for e in EVENTS if e != "phx_reply"]


ONE_DRAW = settings(max_examples=1, phases=[Phase.generate], database=None)
"""`find` with it gives the first value a strategy draws (hypothesis's simplest), at once."""


def _push_corpus() -> list[Case]:
    """A valid payload (one draw of the model's) and an unreadable one of each pushed event.

    Fed before the generated cases: a run's share of the sample (a third of 300 draws)
    missed one event's push or refusal on each seed tried, so that every event meets
    both branches must not depend on the sample alone.
    """
    corpus = []
    for event in PUSHED:
        payload = find(valid_payloads(event), lambda _: True, settings=ONE_DRAW)
        corpus.append(Case(event, dumps(payload), True, payload, "valid (corpus)"))
        corpus.append(Case(event, b"[]", False, [], "not an object (corpus)"))
    return corpus


async def test_near_valid_pushes_on_the_joined_topic_are_delivered_or_counted() -> None:
    """A push under the current join_ref reaches `on_push`, with the payload the spec
    reads from it, iff that payload is valid; else it is counted under its event."""
    seen: set[Outcome] = set()

    def deliver(case: Case, numeric_join_ref: bool) -> None:
        join_ref: Any = int(JOIN_REF) if numeric_join_ref else JOIN_REF
        frame = encode_frame_bytes(
            [dumps(join_ref), b"null", dumps(TOPIC), dumps(case.event), case.raw]
        )
        if not case.parses:
            expected: Outcome = ("bad_frame", None)
        else:
            expected = ("push", case.event) if case.valid else ("bad_payload", case.event)
        probe = make_socket()
        before = copy_stats(probe.socket.stats)
        probe.socket._on_text(frame)
        assert observed_outcomes(before, probe.socket.stats, probe.pushes) == [expected], case
        if expected[0] == "push":
            _, _, payload = probe.pushes[0]
            assert payload == decode_payload(case.event, case.raw)
        seen.add(expected)

    for case in _push_corpus():
        deliver(case, numeric_join_ref=False)

    @settings(SETTINGS, max_examples=examples(300))
    @given(payload_cases(PUSHED), st.booleans())
    def check(case: Case, numeric_join_ref: bool) -> None:
        deliver(case, numeric_join_ref)

    check()
    pushed = {event for kind, event in seen if kind == "push"}
    rejected = {event for kind, event in seen if kind == "bad_payload"}
    assert pushed == rejected == set(EVENT_TYPES) - {"phx_reply"}, seen


# -- REST pages: the list's and the context's metadata ---------------------------------

page_metas = st.fixed_dictionaries(
    {"has_more": st.booleans() | json_values, "limit": st.integers(-5, 200) | json_values},
    optional={
        "next_cursor": st.none() | st.text(max_size=6) | json_values,
        "page": json_values,
        "page_size": json_values,
        "status_filter": json_values,
        "total_count": json_values,
        "total_pages": json_values,
    },
)


@SETTINGS
@given(page_metas)
def test_page_metadata_decodes_to_its_schema_or_is_refused(meta: dict[str, Any]) -> None:
    """`has_more` a bool, `limit` an int, the cursor a string or null, the deprecated
    page fields ints or null, `status_filter` a string or null; anything else is a
    ValidationError, never another exception."""
    body = json.dumps({"data": [], "metadata": meta}).encode()
    ints = ("page", "page_size", "total_count", "total_pages")
    valid = (
        isinstance(meta["has_more"], bool)
        and type(meta["limit"]) is int
        and (meta.get("next_cursor") is None or isinstance(meta["next_cursor"], str))
        and all(meta.get(k) is None or type(meta[k]) is int for k in ints)
        and (meta.get("status_filter") is None or isinstance(meta["status_filter"], str))
    )
    page = _decoded_if_valid(body, MessagePage, valid, meta)
    if page is not None:
        assert page.metadata.has_more is meta["has_more"]


T = TypeVar("T")


def _decoded_if_valid(body: bytes, kind: type[T], valid: bool, shown: object) -> T | None:
    """`body` decoded as `kind` when the model says it is `valid`; refused (a
    ValidationError, never another exception) when it says not."""
    try:
        decoded = msgspec.json.decode(body, type=kind)
    except msgspec.ValidationError:
        assert not valid, shown
        return None
    assert valid, shown
    return decoded


@SETTINGS
@given(
    st.lists(st.tuples(st.booleans(), st.none() | st.sampled_from("abcdef")), max_size=60),
    st.integers(1, 20),
)
def test_a_walk_through_pages_ends_whatever_the_platform_says(
    answers: list[tuple[bool, str | None]], limit: int
) -> None:
    """`Pages`: however a platform answers (`has_more` for ever, cursors repeating or
    missing), the walk takes at most `limit` pages, never asks for a cursor twice, and
    ends at the first page without `has_more` or a cursor."""
    pages = Pages(limit, "fuzz")
    asked: list[str | None] = [pages.cursor]
    for n, (has_more, cursor) in enumerate(answers, start=1):
        pages.advance(ContextMeta(has_more=has_more, limit=100, next_cursor=cursor))
        if not pages.more:
            assert n <= limit
            break
        assert has_more and cursor is not None and pages.cursor == cursor
        asked.append(pages.cursor)
    else:
        assert len(answers) < limit or not pages.more
    assert len(set(asked)) == len(asked)
    assert len(asked) <= limit


@SETTINGS
@given(
    st.one_of(
        st.none(),
        st.fixed_dictionaries({"kind": json_values}, optional={"name": json_values}),
        json_values,
    )
)
def test_an_activity_report_decodes_its_detail_or_is_refused(activity: Any) -> None:
    body = json.dumps({"working": True, "activity": activity}).encode()
    valid = activity is None or (
        isinstance(activity, dict)
        and isinstance(activity.get("kind"), str)
        and (activity.get("name") is None or isinstance(activity["name"], str))
    )
    report = _decoded_if_valid(body, ActivityReport, valid, activity)
    if report is not None:
        assert (report.activity is None) == (activity is None)
