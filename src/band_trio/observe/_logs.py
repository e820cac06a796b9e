"""Log lines an operator can read and a machine can parse.

* `configure_logging(level, "text")` — the format band-trio always had
  (`time LEVEL logger: message`), to stderr;
* `configure_logging(level, "json")` — one JSON object a line: `time` (UTC,
  RFC 3339, milliseconds), `level`, `logger`, `message`, and `room`,
  `message_id`, `correlation_id` where they are known, `exception` with the
  traceback if there is one.

Where they are known: a log call may pass them (`extra={"room": ...}`), and
the work a line is logged from carries them — a turn, a forward or a run binds
its room and message (`bind`) for everything logged inside it, the adapter's
own lines included; a control signal binds its correlation id while it is
applied. (trio copies a task's context into the tasks it starts, so what a
turn starts carries them too.)

httpx2 logs each request at INFO (`HTTP Request: POST …`): a busy agent's log
at INFO would be little else. Those lines are logged at DEBUG here.
"""

from __future__ import annotations

import contextvars
import datetime
import logging
import sys
from typing import Literal

import msgspec

__all__ = [
    "FIELDS",
    "JsonFormatter",
    "LogFormat",
    "bind",
    "bound",
    "configure_logging",
    "correlation_id",
]

LogFormat = Literal["text", "json"]
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
FIELDS = ("room", "message_id", "correlation_id")
"""The context a JSON line carries where it is known."""
_DEMOTED = ("httpx2", "httpx")
"""Libraries whose INFO lines are per request: logged at DEBUG."""

_room: contextvars.ContextVar[str | None] = contextvars.ContextVar("band_room", default=None)
_message: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "band_message_id", default=None
)
_correlation: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "band_correlation_id", default=None
)
_VARS = {"room": _room, "message_id": _message, "correlation_id": _correlation}


def correlation_id() -> str | None:
    """The correlation id of the control signal being applied now, if any."""
    return _correlation.get()


def bind(
    room: str | None = None, message_id: str | None = None, correlation: str | None = None
) -> tuple[contextvars.Token[str | None], ...]:
    """Bind what is given for what is logged from here on in this task; `unbind` it."""
    tokens: list[contextvars.Token[str | None]] = []
    if room is not None:
        tokens.append(_room.set(room))
    if message_id is not None:
        tokens.append(_message.set(message_id))
    if correlation is not None:
        tokens.append(_correlation.set(correlation))
    return tuple(tokens)


def unbind(tokens: tuple[contextvars.Token[str | None], ...]) -> None:
    for token in reversed(tokens):
        token.var.reset(token)


class bound:  # lower case: used like a function, `with bound(room=...):`
    """`bind` for the block."""

    __slots__ = ("_tokens", "_values")

    def __init__(
        self, room: str | None = None, message_id: str | None = None, correlation: str | None = None
    ) -> None:
        self._values = (room, message_id, correlation)
        self._tokens: tuple[contextvars.Token[str | None], ...] = ()

    def __enter__(self) -> None:
        self._tokens = bind(*self._values)

    def __exit__(self, *exc: object) -> None:
        unbind(self._tokens)


class JsonFormatter(logging.Formatter):
    """One JSON object a line (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, str] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = record.__dict__.get(name)
            if value is None:
                value = _VARS[name].get()
            if value is not None:
                line[name] = str(value)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.stack_info:
            line["exception"] = self.formatStack(record.stack_info)
        text = msgspec.json.encode(line).decode()
        # JSON allows these raw, but a reader that splits lines on them (Python's
        # `splitlines`, some log shippers) would cut the record in two
        return (
            text.replace("\x85", "\\u0085")
            .replace("\u2028", "\\u2028")
            .replace("\u2029", "\\u2029")
        )


class _PerRequestToDebug(logging.Filter):
    """Turns a library's per-request INFO line into a DEBUG one, shown only at DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.INFO:
            record.levelno = logging.DEBUG
            record.levelname = "DEBUG"
            return logging.getLogger().isEnabledFor(logging.DEBUG)
        return True


_demoter = _PerRequestToDebug()


def configure_logging(level: str | int, format: LogFormat = "text") -> None:
    """Log to stderr at `level` in `format`, replacing any handler set before."""
    if format not in ("text", "json"):
        raise ValueError(f"a log format is 'text' or 'json', not {format!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    for name in _DEMOTED:
        library = logging.getLogger(name)
        if _demoter not in library.filters:
            library.addFilter(_demoter)
