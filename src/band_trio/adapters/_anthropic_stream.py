"""The Anthropic Messages stream, as the official SDK's stream helper gives it, and
what its errors mean for band-trio's retry rules.

`Draft` follows the helper's events (`client.messages.stream(...)`): it counts
what the answer holds against `UpstreamPolicy.max_answer_chars`, keeps each
content block once the stream closed it (`content_block_stop` carries the
whole block: a tool call's input complete), and knows the answer whole only at
`message_stop`. `upstream_fault` is the one seam from the SDK's exceptions to
`call_upstream`'s: the SDK's own retries are off (`max_retries=0`), so each of
its errors is one attempt's fault, judged by the rules every upstream client of
band-trio follows.
"""

from __future__ import annotations

from typing import Any

import httpx2

try:
    import anthropic as sdk
    from anthropic.lib.streaming import AsyncMessageStream
except ImportError as exc:  # the extra is not installed
    raise ImportError(
        "the Anthropic adapter needs the official SDK: pip install 'band-trio[anthropic]'"
    ) from exc

from ..contract import MAX_ANSWER_CHARS, UpstreamFault, fault_of
from ..errors import PeerProtocolError, UpstreamError
from ..retry import Fault, FaultKind, retry_after

__all__ = ["AnthropicMessagesError", "AsyncMessageStream", "Draft", "Msg", "sdk", "upstream_fault"]

Msg = dict[str, Any]

_MID_STREAM = {
    "overloaded_error": 529,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
}
"""The `error` events Anthropic may send mid-stream that stand for a transient status
("an `overloaded_error`, which would normally correspond to an HTTP 529")."""

_ORDERED = {"content_block_start", "content_block_delta", "content_block_stop", "message_delta"}


class AnthropicMessagesError(UpstreamError):
    """The Messages API failed the request or answered something unusable."""


class Draft:
    """One assistant message, assembled from the stream helper's events."""

    def __init__(self, limit: int = MAX_ANSWER_CHARS) -> None:
        self.limit = limit
        """Characters the answer may hold (`UpstreamPolicy.max_answer_chars`)."""
        self.size = 0
        self.started = False
        self.blocks: dict[int, Msg] = {}
        """The content blocks the stream closed, by index (None-valued kinds left out)."""
        self.final: list[Msg] | None = None
        """The message's blocks, once `message_stop` came."""

    @property
    def ended(self) -> bool:
        return self.final is not None

    def add(self, event: Any) -> None:
        """One event of the helper. An event of the message before `message_start` fails
        the turn (the helper accumulates nothing then); an unknown one is skipped, as
        Anthropic's versioning policy asks of clients."""
        kind = getattr(event, "type", None)
        if kind == "message_start":
            self.started = True
        elif not self.started and (kind in _ORDERED or kind == "message_stop"):
            raise AnthropicMessagesError(f"the stream sent {kind} before message_start")
        elif kind == "content_block_delta":
            delta = event.delta
            piece = getattr(delta, "text", None) or getattr(delta, "partial_json", None)
            self._grew(len(piece) if isinstance(piece, str) else 0)
        elif kind == "content_block_stop":
            block = as_block(event.content_block)
            if block is not None:
                self.blocks[event.index] = block
        elif kind == "message_stop":
            self.final = [b for b in map(as_block, event.message.content) if b is not None]

    def _grew(self, by: int) -> None:
        self.size += by
        if self.size > self.limit:
            raise PeerProtocolError(f"the model's answer ran past {self.limit} characters")

    def message(self, *, cut: bool) -> Msg | None:
        """The assistant message. Cut off, only its tool calls that the stream closed —
        nobody saw its words, and a call whose input was still coming cannot be
        answered (None if none came whole)."""
        if cut:
            uses = [b for _, b in sorted(self.blocks.items()) if b["type"] == "tool_use"]
            return {"role": "assistant", "content": uses} if uses else None
        assert self.final is not None
        blocks = [b for b in self.final if b["type"] != "text" or b["text"]]
        if all(b["type"] == "text" for b in blocks):
            return {"role": "assistant", "content": "".join(b["text"] for b in blocks)}
        return {"role": "assistant", "content": blocks}


def as_block(block: Any) -> Msg | None:
    """A content block of the SDK's as the API takes it back: text and tool use (other
    kinds, such as thinking, which this adapter does not ask for, are left out)."""
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "tool_use":
        arguments = block.input if isinstance(block.input, dict) else {}
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": arguments}
    return None


def upstream_fault(error: Exception, read_timeout: float) -> Exception:
    """What to raise from an attempt for an exception of the SDK's (or of reading its
    stream): an `UpstreamFault` for `call_upstream` to judge, or an error that fails
    the turn at once."""
    if isinstance(error, sdk.APIStatusError):
        kind, detail = _said(error.body)
        if error.status_code < 400:  # an `error` event in a stream that began with 200
            status = _MID_STREAM.get(kind)
            if status is None:
                return AnthropicMessagesError(
                    f"the model provider sent an error mid-stream: {detail}"
                )
            return UpstreamFault.status(status, detail=f"{kind} mid-stream: {detail}")
        wait = retry_after(error.response.headers)
        return UpstreamFault.status(error.status_code, retry_after=wait, detail=detail)
    # APITimeoutError included; where the stream's body fails to read, anthropic 2.0
    # raises httpx2's own error, later 2.x releases an APIConnectionError from it
    cause = error.__cause__ if isinstance(error, sdk.APIConnectionError) else error
    if isinstance(cause, httpx2.HTTPError):
        fault = fault_of(cause)
        if fault.kind is FaultKind.STALLED:
            fault = Fault(FaultKind.STALLED, detail=f"no data for {read_timeout:g} s")
        return UpstreamFault(fault)
    if isinstance(error, sdk.APIConnectionError):  # not the connection's: nothing was sent
        return UpstreamFault(Fault(FaultKind.UNSENT, detail=str(error)))
    if isinstance(error, UpstreamError):
        return error
    # the SDK's decoding of an event (not JSON, a tool input that is not JSON, an index
    # out of range): a garbled stream is not posted as an answer, nor asked again
    what = f"{type(error).__name__}: {error}"[:300]
    return AnthropicMessagesError(
        f"the model provider sent a stream that could not be read: {what}"
    )


def _said(body: object) -> tuple[str, str]:
    """An error answer's `error.type` and `error.message` (Anthropic's shape), else its
    text; a few hundred characters at most."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error.get("type") or ""), error["message"][:300]
    return "", str(body)[:300]
