"""The demo adapter: echoes, after an optional pretend reasoning cycle.

`sleep=<seconds>` anywhere in the text makes it wait that long first, which is
what the demo and the tests use as a stand-in for a long, cancellable turn.
A text that starts with `ask` (after any mentions) asks the room first
(`Turn.ask`, approve or deny) and says what it was told. In a room that steers
(`WhileBusy.STEER`), the messages that arrived meanwhile are taken as guidance
before it answers, and named in the answer.
"""

from __future__ import annotations

import re

import trio

from ..contract import Adapter, Turn

__all__ = ["DemoAdapter", "demo"]

_SLEEP = re.compile(r"sleep=(\d+(?:\.\d+)?)")
_ASK = re.compile(r"(?:@\S+\s+)*ask\b[ \t]*(.*)", re.DOTALL | re.IGNORECASE)


class DemoAdapter(Adapter):
    """Replies `echo: <text>`; `sleep=<seconds>` in the text delays the reply; `ask ...`
    asks the room first and replies `<choice>: <text>`."""

    async def on_turn(self, turn: Turn) -> None:
        text = turn.message.content
        match = _SLEEP.search(text)
        if match:
            await trio.sleep(float(match.group(1)))
        head = "echo"
        asking = _ASK.fullmatch(text)
        if asking:
            question = _SLEEP.sub("", asking.group(1)).strip() or "May I go ahead?"
            head = await turn.ask(question)
        answer = f"{head}: {text}"
        guidance = turn.take_guidance()
        if guidance:
            answer += " (guidance: " + "; ".join(m.content for m in guidance) + ")"
        await turn.reply(answer)


def demo() -> DemoAdapter:
    """The demo adapter (for `--adapter band_trio.adapters:demo`)."""
    return DemoAdapter()
