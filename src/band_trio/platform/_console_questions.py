"""The agents' questions in a room, read back from its messages for the console.

An agent asks the room (`Turn.ask`) with a plain post whose first line names the
question and its choices, and whose mentions are who may answer:

    Question q-3f2a9c1b — reply with one of: approve, deny
    (blank line)
    the question's text

(`Question q-… (anyone may answer) — …` when anyone who is not an agent may).
The format is defined once, in `band_trio._question_format`, below the
platform, the contract and the runtime alike. Nothing here trusts a post: a
header that does not parse exactly, or names more or longer choices than
`Turn.ask` allows, is an ordinary message.

What became of each question is read from the posts after it, in room order, as
the agent's question desk reads them (`runtime/_questions.py`):

| a later post                                                    | the question is        |
|-----------------------------------------------------------------|------------------------|
| from someone who may answer, that reaches the agent (it has a   | answered (first only)  |
| delivery to it) and whose first word after leading mentions is  |                        |
| a choice (case-insensitive, trailing punctuation ignored)       |                        |
| the agent's `Question <same id> withdrawn: <reason>.`           | withdrawn              |
| the agent's next question, while this one is still open        | superseded             |

and a question still open when the agent is stopped in the room is withdrawn
("the work was stopped"): a stop ends the wait, and a stopped room takes no
post, so the agent cannot say so (`StopMemory` keeps it withdrawn after play).
A question that is superseded was left open by a run of the agent that ended
without a word (a kill, a stop no page saw): the replayed turn asked again.
The agent's own withdrawal is the better word, so one that comes after the
newer question (the two posts can cross) still counts.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from .._question_format import STOPPED, chosen, parse_question, parse_withdrawal
from ._records import Message

__all__ = ["Asked", "QuestionState", "StopMemory", "chosen", "read_questions"]


class QuestionState(enum.Enum):
    OPEN = "open"
    ANSWERED = "answered"
    WITHDRAWN = "withdrawn"
    SUPERSEDED = "superseded"


_UNANSWERED = (QuestionState.OPEN, QuestionState.SUPERSEDED)


@dataclass(slots=True)
class Asked:
    """One question as the room's posts show it."""

    qid: str
    message_id: str
    agent_id: str
    text: str
    choices: tuple[str, ...]
    anyone: bool
    """Anyone who is not an agent may answer (else: the post's mentions)."""
    answerers: tuple[str, ...]
    """The post's mentions: who may answer, unless `anyone`."""
    state: QuestionState = QuestionState.OPEN
    choice: str | None = None
    answered_by: str | None = None
    answer_id: str | None = None
    reason: str | None = None
    """Why it was withdrawn, as the agent said (empty when it gave none)."""
    superseded_by: str | None = field(default=None)

    def may_answer(self, participant_id: str, participant_type: str) -> bool:
        if participant_type == "Agent":  # the desk never takes an agent's reply
            return False
        return self.anyone or participant_id in self.answerers


class StopMemory:
    """The questions seen open while their agent was stopped in the room.

    The stop withdrew each (its turn was cancelled), but nothing in the room says
    so, and after play it would read open again until the replayed turn asks anew.
    Kept in memory, the newest `keep`: after a platform restart the newer question
    supersedes it all the same."""

    __slots__ = ("_keep", "_seen")

    def __init__(self, keep: int = 1024) -> None:
        self._keep = keep
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()

    def __contains__(self, key: object) -> bool:
        return key in self._seen

    def add(self, agent_id: str, qid: str) -> None:
        self._seen[agent_id, qid] = None
        while len(self._seen) > self._keep:
            self._seen.popitem(last=False)


def _parse(message: Message) -> Asked | None:
    posted = parse_question(message.content)
    if posted is None:
        return None
    return Asked(
        qid=posted.qid,
        message_id=message.id,
        agent_id=message.sender_id,
        text=posted.text,
        choices=posted.choices,
        anyone=posted.anyone,
        answerers=tuple(m["id"] for m in message.mentions if isinstance(m.get("id"), str)),
    )


def read_questions(
    messages: Sequence[Message],
    recipients: Mapping[int, Mapping[str, object]],
    stopped: Collection[str] = (),
    memory: StopMemory | None = None,
) -> dict[str, Asked]:
    """The questions among `messages` (oldest first), by the id of their post.

    `recipients`: each message's agents, by its seq (the deliveries): a reply
    answers only an agent it reached. `stopped`: the agents stopped in the room
    now; `memory`: the questions they were stopped in before. One pass, with at
    most one open question per agent: linear in the messages, whatever they say."""
    found: dict[str, Asked] = {}
    by_qid: dict[tuple[str, str], Asked] = {}
    open_now: dict[str, Asked] = {}  # agent id → its open question
    for message in messages:
        sender = message.sender_id
        if message.sender_type == "Agent":
            asked = _parse(message)
            if asked is not None:
                earlier = open_now.pop(sender, None)
                if earlier is not None and memory is not None and (sender, earlier.qid) in memory:
                    earlier.state, earlier.reason = QuestionState.WITHDRAWN, STOPPED
                elif earlier is not None:
                    earlier.state = QuestionState.SUPERSEDED
                    earlier.superseded_by = asked.qid
                found[asked.message_id] = asked
                by_qid[sender, asked.qid] = asked
                open_now[sender] = asked
                continue
            withdrawn = parse_withdrawal(message.content)
            if withdrawn is not None:
                target = by_qid.get((sender, withdrawn[0]))
                if target is not None and target.state in _UNANSWERED:
                    target.state = QuestionState.WITHDRAWN
                    target.reason = withdrawn[1]
                    target.superseded_by = None
                    if open_now.get(sender) is target:
                        del open_now[sender]
                continue
        if not open_now:
            continue
        reached = recipients.get(message.seq, {})
        for agent_id, asked in list(open_now.items()):
            if agent_id not in reached or not asked.may_answer(sender, message.sender_type):
                continue
            choice = chosen(message.content, asked.choices)
            if choice is not None:
                asked.state = QuestionState.ANSWERED
                asked.choice = choice
                asked.answered_by = sender
                asked.answer_id = message.id
                del open_now[agent_id]
    for agent_id, asked in open_now.items():
        if agent_id in stopped and memory is not None:
            memory.add(agent_id, asked.qid)
        if agent_id in stopped or (memory is not None and (agent_id, asked.qid) in memory):
            asked.state, asked.reason = QuestionState.WITHDRAWN, STOPPED
    return found
