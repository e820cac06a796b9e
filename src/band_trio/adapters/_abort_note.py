"""What to tell a model whose previous answer in the room was cut off (`Turn.last_abort`).

A peer that keeps the conversation itself (OpenCode, the Copilot CLI) holds a
partial answer nobody saw; the room's next prompt says so, and why, once.
"""

from __future__ import annotations

from ..contract import Turn

__all__ = ["abort_note"]


def abort_note(cut: str | None, turn: Turn) -> str | None:
    """The note for `turn`, if the room's last turn (for message `cut`) was aborted."""
    if cut is None:
        return None
    abort = turn.last_abort
    if abort is not None and abort.message_id == cut:
        verb = "interrupted" if abort.kind == "interrupt" else "stopped"
        why = " ".join((abort.reason or "").split())
        note = f"Your previous answer was {verb} by the user" + (f" (reason: {why})" if why else "")
    else:  # not a signal the runtime told us about: a turn deadline, a shutdown
        note = "Your previous answer was cut off"
    note += " before it was posted, so nobody saw it."
    if cut == turn.message.id:
        note += " The room has resumed: answer the message again."
    return note
