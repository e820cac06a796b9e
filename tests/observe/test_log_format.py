"""The JSON log format line by line: its fields, the context a line carries where it is
known (given with the call, or bound by the work it is logged from), one line per
record whatever the message holds, and httpx2's request lines demoted to DEBUG."""

from __future__ import annotations

import datetime
import io
import json
import logging
from collections.abc import Iterator

import pytest
import trio

from band_trio import observe
from band_trio.observe._logs import _PerRequestToDebug


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(observe.JsonFormatter())
    logger = logging.getLogger("band_trio.test_json")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield stream
    finally:
        logger.removeHandler(handler)


def records(stream: io.StringIO) -> list[dict[str, str]]:
    text = stream.getvalue()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def test_a_line_has_time_level_logger_message(lines: io.StringIO) -> None:
    logging.getLogger("band_trio.test_json").info("room %s: %d turn(s)", "R", 2)
    (record,) = records(lines)
    assert set(record) == {"time", "level", "logger", "message"}
    assert record["level"] == "INFO" and record["logger"] == "band_trio.test_json"
    assert record["message"] == "room R: 2 turn(s)"
    stamp = datetime.datetime.fromisoformat(record["time"])
    assert stamp.utcoffset() == datetime.timedelta(0)
    assert abs(stamp - datetime.datetime.now(datetime.UTC)) < datetime.timedelta(seconds=60)


def test_context_given_or_bound_is_carried(lines: io.StringIO) -> None:
    log = logging.getLogger("band_trio.test_json")
    log.info("given", extra={"room": "R1", "message_id": "M1", "correlation_id": "C1"})
    with observe.bound(room="R2", message_id="M2"):
        log.info("bound")
        with observe.bound(correlation="C3"):
            log.info("nested")
        log.info("given wins", extra={"room": "R4"})
    log.info("after")
    given, bound, nested, wins, after = records(lines)
    assert (given["room"], given["message_id"], given["correlation_id"]) == ("R1", "M1", "C1")
    assert (bound["room"], bound["message_id"]) == ("R2", "M2") and "correlation_id" not in bound
    assert nested["correlation_id"] == "C3" and nested["room"] == "R2"
    assert wins["room"] == "R4" and wins["message_id"] == "M2"
    assert not {"room", "message_id", "correlation_id"} & set(after)


async def test_a_task_started_inside_bound_work_carries_it(lines: io.StringIO) -> None:
    log = logging.getLogger("band_trio.test_json")
    async with trio.open_nursery() as nursery:
        with observe.bound(room="R", message_id="M"):
            nursery.start_soon(_log_in_task, log, "inside")
        nursery.start_soon(_log_in_task, log, "outside")  # started outside: carries nothing
    found = {record["message"]: record for record in records(lines)}
    inside, outside = found["inside"], found["outside"]
    assert (inside["room"], inside["message_id"]) == ("R", "M")
    assert "room" not in outside


async def _log_in_task(log: logging.Logger, what: str) -> None:
    await trio.lowlevel.checkpoint()
    log.info(what)


def test_odd_content_stays_one_line(lines: io.StringIO) -> None:
    log = logging.getLogger("band_trio.test_json")
    try:
        raise ValueError('bad\nvalue "quoted" \x00 \u2028 \x85 \u2029 \r')
    except ValueError:
        log.exception("failed on %r", "id\nwith newline")
    (record,) = records(lines)  # one line, however many the message and traceback hold
    assert record["message"] == "failed on 'id\\nwith newline'"
    assert "ValueError: bad\nvalue" in record["exception"]
    assert 'quoted" \x00 \u2028 \x85 \u2029 \r' in record["exception"]
    assert record["level"] == "ERROR"


def test_request_lines_of_httpx2_are_debug() -> None:
    demote = _PerRequestToDebug()
    record = logging.LogRecord("httpx2", logging.INFO, __file__, 1, "HTTP Request: GET /", (), None)
    root = logging.getLogger()
    level = root.level
    try:
        root.setLevel(logging.INFO)
        assert demote.filter(record) is False  # shown only at DEBUG
        assert (record.levelno, record.levelname) == (logging.DEBUG, "DEBUG")
        root.setLevel(logging.DEBUG)
        again = logging.LogRecord("httpx2", logging.INFO, __file__, 1, "HTTP Request", (), None)
        assert demote.filter(again) is True
        warning = logging.LogRecord("httpx2", logging.WARNING, __file__, 1, "odd", (), None)
        root.setLevel(logging.WARNING)
        assert demote.filter(warning) is True and warning.levelname == "WARNING"
    finally:
        root.setLevel(level)


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="'text' or 'json'"):
        observe.configure_logging("INFO", "yaml")  # type: ignore[arg-type]
