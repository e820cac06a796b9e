"""The room's question desk and the contract's reading of a reply (sans-IO)."""

from __future__ import annotations

import pytest

from band_trio.contract import ANYONE, Message, Question, chosen
from band_trio.runtime._question_text import parse_question, question_post
from band_trio.runtime._questions import SURPLUS_WINDOW, Desk, State, Verdict

ALICE, BOB, AGENT = "alice", "bob", "agent"


def msg(content: str, sender: str = ALICE, sender_type: str = "User", mid: str = "m") -> Message:
    return Message(id=mid, room_id="r", content=content, sender_id=sender, sender_type=sender_type)


def question(*choices: str, who: tuple[str, ...] = (ALICE,)) -> Question:
    return Question.make(
        "Go?", choices or ("approve", "deny"), answerers=who, timeout=5, default=None
    )


@pytest.mark.parametrize(
    ("content", "picked"),
    [
        ("approve", "approve"),
        ("@agent Approve.", "approve"),
        ("@agent @other   DENY!", "deny"),
        ("approve, but carefully", "approve"),
        ("@agent please approve", None),
        ("", None),
        ("@agent", None),
        ("approved", None),
    ],
)
def test_a_reply_picks_its_first_word_after_the_mentions(content: str, picked: str | None) -> None:
    assert chosen(content, ("approve", "deny")) == picked


@pytest.mark.parametrize(
    ("choices", "error"),
    [
        (("approve",), "2 to 8 choices"),
        (tuple(f"c{i}" for i in range(9)), "2 to 8 choices"),
        (("go ahead", "no"), "one word"),
        (("a,b", "c"), "one word"),
        (("@x", "y"), "one word"),
        (("Yes", "yes"), "differ"),
        ("approve", "not one string"),
        (("x" * 33, "y"), "one word"),
    ],
)
def test_a_malformed_question_is_refused_with_what_to_change(
    choices: tuple[str, ...], error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        Question.make("Go?", choices, answerers=(ALICE,), timeout=5, default=None)


def test_the_default_is_the_last_choice_unless_given_and_must_be_one() -> None:
    assert question("yes", "no").default == "no"
    made = Question.make("Go?", ("yes", "no"), answerers=(ALICE,), timeout=5, default="YES")
    assert made.default == "yes"
    with pytest.raises(ValueError, match="default"):
        Question.make("Go?", ("yes", "no"), answerers=(ALICE,), timeout=5, default="maybe")
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="timeout"):
            Question.make("Go?", ("yes", "no"), answerers=(ALICE,), timeout=bad, default=None)
    with pytest.raises(ValueError, match="non-blank"):
        Question.make("  ", ("yes", "no"), answerers=(ALICE,), timeout=5, default=None)
    with pytest.raises(ValueError, match="at most"):
        Question.make("x" * 4001, ("yes", "no"), answerers=(ALICE,), timeout=5, default=None)


def test_the_post_reads_back_with_its_id_and_choices() -> None:
    asked = Question.make(
        "Ship\nit?", ("ship", "hold"), answerers=(ANYONE,), timeout=5, default=None
    )
    posted = parse_question(question_post("q-0123abcd", asked))
    assert posted is not None
    assert (posted.qid, posted.choices, posted.anyone) == ("q-0123abcd", ("ship", "hold"), True)
    assert parse_question("Question q-0123abcd — reply with one of: a") is None  # one choice
    assert parse_question("question q-0123abcd — reply with one of: a, b") is None
    assert parse_question("Question q-zz — reply with one of: a, b") is None


def test_the_open_question_takes_one_answer_from_who_may_answer() -> None:
    desk = Desk()
    asked = desk.open(question(), (ALICE,))
    assert desk.classify(msg("approve", BOB)) == (Verdict.NOT_YOURS, asked, "approve")
    assert desk.classify(msg("approve", AGENT, "Agent")) is None  # agents never answer
    assert desk.classify(msg("what is this?")) is None
    assert desk.classify(msg("@agent deny")) == (Verdict.ANSWER, asked, "deny")
    assert asked.answer == "deny" and asked.answered.is_set()
    assert desk.classify(msg("approve")) == (Verdict.SURPLUS, asked, "approve")
    desk.turn_ended()
    assert desk.classify(msg("deny")) == (Verdict.SURPLUS, asked, "deny")  # a double press
    asked.answered_at -= SURPLUS_WINDOW  # its turn is over, and the window passed
    assert desk.classify(msg("approve the next release")) is None


def test_a_withdrawn_question_takes_one_late_answer_then_none() -> None:
    desk = Desk()
    asked = desk.open(question(), (ALICE,))
    desk.withdraw(asked, "the work was interrupted", note=True)
    desk.turn_ended()
    assert desk.unposted == [asked]
    assert desk.classify(msg("approve")) == (Verdict.LATE, asked, "approve")
    assert desk.classify(msg("approve")) is None
    assert asked.state is State.CLOSED


def test_anyone_means_any_person() -> None:
    desk = Desk()
    asked = desk.open(question(who=(ANYONE,)), (ALICE,))
    assert desk.classify(msg("deny", AGENT, "Agent")) is None
    assert desk.classify(msg("deny", BOB)) == (Verdict.ANSWER, asked, "deny")


def test_a_thousand_questions_keep_a_bounded_memory() -> None:
    desk = Desk()
    for _ in range(1000):
        asked = desk.open(question(), (ALICE,))
        desk.withdraw(asked, "no answer", note=False)
    assert len(desk._records) == 32
    assert desk.classify(msg("approve")) == (Verdict.LATE, asked, "approve")  # the newest


def test_the_history_of_an_earlier_run_is_read_back() -> None:
    earlier = Question.make("Go?", ("approve", "deny"), answerers=(ALICE,), timeout=5, default=None)
    post = Message(
        id="q1", room_id="r", content=question_post("q-00000001", earlier),
        sender_id=AGENT, sender_type="Agent", mentions=(ALICE,),
    )  # fmt: skip
    history = [
        msg("deploy", mid="m1"),
        post,
        msg("approve", BOB, mid="m2"),  # not Alice's to answer
        msg("@agent approve", mid="m3"),  # the dead run's answer
        msg("approve again", mid="m4"),  # a message like any other
    ]
    desk = Desk()
    desk.learn(history, AGENT)
    assert desk.scanned
    assert desk.classify(msg("approve", mid="m4")) is None
    late = desk.classify(msg("@agent approve", mid="m3"))
    assert late is not None and late[0] is Verdict.LATE and late[1].qid == "q-00000001"
    assert desk.classify(msg("@agent approve", mid="m3")) is None  # consumed once


def test_only_a_reply_s_head_is_read() -> None:
    assert chosen("@a " * 3_000_000 + "approve", ("approve", "deny")) is None
    assert chosen("@a " * 1000 + "approve", ("approve", "deny")) == "approve"
