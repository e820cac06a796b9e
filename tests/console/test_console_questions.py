"""The console's question cards: an agent's question read back from the room, answered
from the page, and what became of it — over real loopback sockets, with the demo agent
asking (`Turn.ask`), plus the reading itself held to the runtime's wire format.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx2
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st
from test_console import State, message, stream

from band_trio.adapters import DemoAdapter
from band_trio.contract import ANYONE, Question, chosen
from band_trio.platform import Platform
from band_trio.platform._console_questions import (
    STOPPED,
    QuestionState,
    StopMemory,
    read_questions,
)
from band_trio.platform._console_questions import chosen as console_chosen
from band_trio.platform._records import Delivery, Message
from band_trio.runtime._question_text import question_post, withdrawal_post
from support import running_agent, seeded, status

DEADLINE = 10


def card(state: State, index: int = -1) -> dict[str, Any] | None:
    """The `index`-th question card of the room's state (the newest by default)."""
    room = state["room"] or {}
    cards = [m["question"] for m in room.get("messages", ()) if m["question"]]
    return cards[index] if -len(cards) <= index < len(cards) else None


def card_is(s: State, index: int, **expected: Any) -> bool:
    found = card(s, index)
    return found is not None and all(found[key] == value for key, value in expected.items())


async def test_a_question_is_shown_answered_from_the_page_and_marked_answered(
    console: Platform, http: httpx2.AsyncClient
) -> None:
    agent_id, room_id, user_id = seeded(console)
    with trio.fail_after(DEADLINE):
        async with stream(http, room_id) as live, running_agent(console, DemoAdapter()):
            await http.post(
                "/_console/api/messages", json={"room_id": room_id, "content": "ask deploy?"}
            )
            state = await live.until(lambda s: card_is(s, -1, state="open"))
            asked = card(state)
            assert asked is not None
            assert asked["text"] == "deploy?"
            assert asked["choices"] == ["approve", "deny"]
            assert asked["anyone"] is False
            assert asked["answerers"] == [{"id": user_id, "name": "Alice"}]
            assert asked["may_answer"] is True
            assert asked["agent_handle"] == "demo-agent"
            answer = {"room_id": room_id, "question": asked["id"], "choice": "Approve"}
            posted = await http.post("/_console/api/answers", json=answer)
            assert posted.status_code == 201, posted.text
            assert posted.json()["content"] == "@demo-agent approve"  # as a person types it
            assert posted.json()["mentions"] == [agent_id]
            state = await live.until(lambda s: message(s, "approve: ask deploy?") is not None)
            await live.until(lambda s: card_is(s, -1, state="answered"))
            answered = card(live.states[-1])
            assert answered is not None and answered["choice"] == "approve"
            assert answered["answered_by"] == {"id": user_id, "name": "Alice"}
            assert answered["answer_id"] == posted.json()["id"]
            await console.wait_until(lambda: status(console, posted.json()["id"]) == "processed")
            again = await http.post("/_console/api/answers", json=answer)
    assert again.status_code == 409
    assert again.json()["error"]["message"] == (
        f'Question {asked["id"]} is already answered ("approve"): nothing was sent.'
    )
    assert [m.content for m in console.messages(room_id)][-1] == "approve: ask deploy?"


async def test_a_question_for_someone_else_cannot_be_answered_and_an_interrupt_withdraws_it(
    console: Platform, http: httpx2.AsyncClient
) -> None:
    agent_id, room_id, _ = seeded(console)
    other = console.create_user(name="Other person", handle="other").id or ""
    console.add_participant(room_id, other)
    with trio.fail_after(DEADLINE):
        async with stream(http, room_id) as live, running_agent(console, DemoAdapter()):
            console.post_message(room_id, other, "ask deploy?")
            state = await live.until(lambda s: card_is(s, -1, state="open"))
            asked = card(state)
            assert asked is not None
            assert asked["answerers"] == [{"id": other, "name": "Other person"}]
            assert asked["may_answer"] is False
            answer = {"room_id": room_id, "question": asked["id"], "choice": "approve"}
            refused = await http.post("/_console/api/answers", json=answer)
            assert refused.status_code == 403
            assert "nothing was sent" in refused.json()["error"]["message"]
            wrong = await http.post("/_console/api/answers", json={**answer, "choice": "maybe"})
            assert wrong.status_code == 422
            assert "(approve, deny)" in wrong.json()["error"]["message"]
            pressed = await http.post(
                "/_console/api/control",
                json={"mode": "interrupt", "agent_id": agent_id, "room_id": room_id},
            )
            assert pressed.status_code == 202
            state = await live.until(lambda s: card_is(s, -1, state="withdrawn"))
            withdrawn = card(state)
            assert withdrawn is not None and withdrawn["reason"] == "the work was interrupted"
            late = await http.post("/_console/api/answers", json=answer)
    assert late.status_code == 409
    assert "withdrawn (the work was interrupted)" in late.json()["error"]["message"]
    unknown = await http.post("/_console/api/answers", json={**answer, "question": "q-00000000"})
    assert unknown.status_code == 404
    assert "no question q-00000000" in unknown.json()["error"]["message"]
    assert console.messages(room_id)[-1].content.startswith(f"Question {asked['id']} withdrawn")


async def test_a_question_anyone_may_answer_is_open_to_the_console_user(
    console: Platform, http: httpx2.AsyncClient
) -> None:
    agent_id, room_id, user_id = seeded(console)
    other = console.create_user(name="Other person", handle="other").id or ""
    console.add_participant(room_id, other)
    text = question_post("q-0123abcd", question(answerers=(ANYONE,)))
    console.post_message(room_id, agent_id, text, mentions=[other])
    async with stream(http, room_id) as live:
        state = await live.until(lambda s: card_is(s, -1, state="open"))
        assert card_is(state, -1, anyone=True, may_answer=True)
        answer = {"room_id": room_id, "question": "q-0123abcd", "choice": "deny"}
        posted = await http.post("/_console/api/answers", json=answer)
        assert posted.status_code == 201
        state = await live.until(lambda s: card_is(s, -1, state="answered"))
    assert card_is(state, -1, choice="deny", answered_by={"id": user_id, "name": "Alice"})


async def test_a_stop_withdraws_a_question_and_play_asks_it_again(
    console: Platform, http: httpx2.AsyncClient
) -> None:
    agent_id, room_id, _ = seeded(console)
    control = {"agent_id": agent_id, "room_id": room_id}
    with trio.fail_after(DEADLINE):
        async with stream(http, room_id) as live, running_agent(console, DemoAdapter()):
            console.post_message(room_id, console.info.user_id or "", "ask deploy?")
            asked = card(await live.until(lambda s: card_is(s, -1, state="open")))
            assert asked is not None
            await http.post("/_console/api/control", json={"mode": "stop", **control})
            state = await live.until(lambda s: card_is(s, -1, state="withdrawn"))
            assert card_is(state, -1, reason="the work was stopped", id=asked["id"])
            stopped = len(live.states) - 1
            answer = {"room_id": room_id, "question": asked["id"], "choice": "approve"}
            refused = await http.post("/_console/api/answers", json=answer)
            assert refused.status_code == 409
            await http.post("/_console/api/control", json={"mode": "play", **control})
            state = await live.until(lambda s: card_is(s, 1, state="open"))
            # from the stop to the new question, the old one never read open again
            assert all(card_is(s, 0, state="withdrawn") for s in live.states[stopped:])
            again = card(state, 1)
            assert again is not None and again["id"] != asked["id"]
            posted = await http.post(
                "/_console/api/answers", json={**answer, "question": again["id"]}
            )
            assert posted.status_code == 201
            await live.until(lambda s: message(s, "approve: ask deploy?") is not None)
    assert card_is(live.states[-1], 0, state="withdrawn", reason="the work was stopped")


# -- the reading, held to the runtime's wire format and the contract's rule ---------


def question(
    text: str = "Deploy?",
    choices: Sequence[str] = ("approve", "deny"),
    answerers: Sequence[str] = ("u1",),
) -> Question:
    return Question.make(text, choices, answerers=answerers, timeout=600, default=None)


class Room:
    """Messages as the store gives them, and their deliveries (who each reached)."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.reached: dict[int, dict[str, Delivery]] = {}

    def post(
        self,
        sender: str,
        content: str,
        mentions: Sequence[str] = (),
        *,
        to: Sequence[str] = ("a1", "a2"),
    ) -> str:
        seq = len(self.messages) + 1
        kind = "Agent" if sender.startswith("a") else "User"
        self.messages.append(
            Message(
                seq, f"m{seq}", "r1", content, sender, kind, sender, "text",
                [{"id": m} for m in mentions], f"2026-01-01T00:00:{seq:02d}Z",
            )
        )  # fmt: skip
        self.reached[seq] = {a: Delivery("delivered", 0, 0) for a in to if a != sender}
        return f"m{seq}"

    def ask(self, qid: str, q: Question | None = None, agent: str = "a1") -> str:
        q = q or question()
        mentions = ("u1",) if ANYONE in q.answerers else q.answerers
        return self.post(agent, question_post(qid, q), mentions)

    def read(self) -> dict[str, Any]:
        return read_questions(self.messages, self.reached)


def test_the_runtimes_posts_are_read_back_as_it_wrote_them() -> None:
    room = Room()
    asked = question("Ship it?\n\nIt is <b>big</b>.", ("Yes", "no", "later"), ("u1", "u2"))
    first = room.ask("q-0000aaaa", asked)
    second = room.ask("q-0000bbbb", question(answerers=(ANYONE,)), agent="a2")
    read = room.read()
    assert read[first].qid == "q-0000aaaa"
    assert read[first].text == "Ship it?\n\nIt is <b>big</b>."  # as sent: the page escapes
    assert read[first].choices == ("Yes", "no", "later")
    assert read[first].answerers == ("u1", "u2") and not read[first].anyone
    assert read[second].anyone and read[second].agent_id == "a2"
    room.post("a1", withdrawal_post("q-0000aaaa", 'no answer within 600s; went ahead with "no"'))
    read = room.read()
    assert read[first].state is QuestionState.WITHDRAWN
    assert read[first].reason == 'no answer within 600s; went ahead with "no"'
    assert read[second].state is QuestionState.OPEN


def test_the_first_answer_from_an_allowed_person_that_reaches_the_agent_counts() -> None:
    room = Room()
    asked = room.ask("q-0000aaaa")
    room.post("u2", "approve")  # not theirs to answer
    room.post("u1", "@a2 approve", ["a2"], to=("a2",))  # never reached a1
    room.post("a2", "approve")  # an agent's reply never answers
    room.post("u1", "what is this?")  # not a choice
    answer = room.post("u1", "@a1 Deny!", ["a1"], to=("a1",))
    room.post("u1", "approve")  # surplus
    read = room.read()[asked]
    assert (read.state, read.choice, read.answered_by, read.answer_id) == (
        QuestionState.ANSWERED, "deny", "u1", answer,
    )  # fmt: skip


def test_a_newer_question_supersedes_an_open_one_unless_the_agent_says_more() -> None:
    room = Room()
    old = room.ask("q-0000aaaa")
    other_agents = room.ask("q-0000cccc", agent="a2")
    new = room.ask("q-0000bbbb")  # a1 was killed: its replayed turn asks again
    answer = room.post("u1", "@a1 approve", ["a1"], to=("a1",))
    read = room.read()
    assert read[old].state is QuestionState.SUPERSEDED
    assert read[old].superseded_by == "q-0000bbbb" and read[old].reason is None
    assert read[new].state is QuestionState.ANSWERED and read[new].answer_id == answer
    assert read[other_agents].state is QuestionState.OPEN  # each agent has its own
    room.post("a1", withdrawal_post("q-0000aaaa", "the work was interrupted"))  # posts crossed
    room.post("a1", withdrawal_post("q-0000bbbb", "the work was interrupted"))
    read = room.read()
    assert read[old].state is QuestionState.WITHDRAWN  # the agent's word is the better one
    assert read[old].reason == "the work was interrupted" and read[old].superseded_by is None
    assert read[new].state is QuestionState.ANSWERED  # an answer stands


def test_a_stop_withdraws_the_open_question_for_good() -> None:
    room = Room()
    asked = room.ask("q-0000aaaa")
    memory = StopMemory(keep=2)
    read = read_questions(room.messages, room.reached, {"a1"}, memory)  # stopped now
    assert (read[asked].state, read[asked].reason) == (QuestionState.WITHDRAWN, STOPPED)
    read = read_questions(room.messages, room.reached, (), memory)  # played
    assert read[asked].state is QuestionState.WITHDRAWN
    assert read_questions(room.messages, room.reached)[asked].state is QuestionState.OPEN
    memory.add("a1", "q-0000bbbb")
    memory.add("a1", "q-0000cccc")
    assert ("a1", "q-0000aaaa") not in memory  # bounded: the oldest goes


@pytest.mark.parametrize(
    "header",
    [
        "Question q-0000aaaa — reply with one of: approve",  # one choice
        "Question q-0000aaaa — reply with one of: " + ", ".join(f"c{i}" for i in range(9)),
        "Question q-0000aaaa — reply with one of: approve, " + "x" * 33,
        "Question q-0000aaaa — reply with one of: approve, Approve",
        "Question q-0000aaaa — reply with one of: approve, @deny",
        "Question q-0000aaaa — reply with one of: approve, deny and more",
        "Question q-0000AAAA — reply with one of: approve, deny",
        " Question q-0000aaaa — reply with one of: approve, deny",
    ],
)
def test_a_post_that_is_not_exactly_a_question_is_an_ordinary_message(header: str) -> None:
    room = Room()
    room.post("a1", f"{header}\n\nDeploy?", ["u1"])
    assert room.read() == {}


def test_a_user_cannot_post_a_question_card() -> None:
    room = Room()
    room.post("u1", question_post("q-0000aaaa", question()), ["u1"])
    assert room.read() == {}


_words = st.text(st.sampled_from("aAbB@.,!?' \n\t\x1c\xa0\u2003çÇ"), max_size=12)


@given(content=_words, choices=st.sampled_from([("a", "b"), ("Ab", "ç"), ("a.", "bb")]))
def test_a_reply_picks_the_choice_the_contract_picks(content: str, choices: Any) -> None:
    assert console_chosen(content, choices) == chosen(content, choices)
