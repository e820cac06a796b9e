"""The ACP adapter's pieces without an agent: the answer gathered from updates, the
permission policy, a terminal's output kept to its limit, the room → session map."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from band_trio.adapters import AcpConfig
from band_trio.adapters._acp_permissions import decide, options_for, question_for
from band_trio.adapters._acp_session import Answer
from band_trio.adapters._acp_state import SessionMap
from band_trio.adapters._acp_terminals import _Terminal
from band_trio.errors import ConfigurationError


def chunk(text: str, message: str | None = "m1") -> dict[str, Any]:
    return {"sessionUpdate": "agent_message_chunk", "messageId": message, "content": {"text": text}}


def test_chunks_of_one_message_are_joined_and_messages_are_paragraphs() -> None:
    answer = Answer()
    for update in (chunk("Hel"), chunk("lo."), {"sessionUpdate": "plan"}, chunk(" Bye.", "m2")):
        answer.add(update)
    assert answer.text() == "Hello.\n\nBye."


def test_a_tool_call_is_one_start_event_and_one_end_event_and_they_are_capped() -> None:
    answer = Answer(max_events=3)
    start = {"sessionUpdate": "tool_call", "toolCallId": "t", "title": "ls", "kind": "read"}
    done = {"sessionUpdate": "tool_call_update", "toolCallId": "t", "status": "completed"}
    done["content"] = [{"type": "content", "content": {"type": "text", "text": "a b"}}]
    for update in (start, {**start, "status": "in_progress"}, done, done):
        answer.add(update)
    events = answer.take_events()
    assert [(e.message_type, e.content) for e in events] == [
        ("tool_call", "ls"),
        ("tool_result", "a b"),
    ]
    assert events[1].metadata == {"tool_call_id": "t", "kind": "read", "status": "completed"}
    for i in range(3):  # the prompt's third event is its last: the others are counted
        answer.add({**start, "toolCallId": f"x{i}"})
    assert [e.content for e in answer.take_events()] == ["ls"]
    assert answer.dropped_events == 2


def test_an_answer_past_its_limit_stops_gathering() -> None:
    answer = Answer(max_chars=5)
    answer.add(chunk("1234"))
    answer.add(chunk("5678"))
    assert answer.too_long and answer.text() == "1234"


OPTIONS = [
    {"optionId": "a1", "kind": "allow_always"},
    {"optionId": "a", "kind": "allow_once"},
    {"optionId": "r", "kind": "reject_once"},
]


@pytest.mark.parametrize(
    ("kind", "options", "chosen", "verdict"),
    [
        ("execute", OPTIONS, {"outcome": "selected", "optionId": "a"}, "granted"),
        ("edit", OPTIONS, {"outcome": "selected", "optionId": "r"}, "denied"),
        (None, OPTIONS, {"outcome": "selected", "optionId": "r"}, "denied"),  # "other"
        ("execute", OPTIONS[:1], {"outcome": "selected", "optionId": "a1"}, "granted"),
        ("edit", OPTIONS[:2], {"outcome": "cancelled"}, "denied"),  # nothing to reject with
    ],
)
def test_the_policy_picks_the_option_that_says_what_it_decided(
    kind: str | None, options: list[dict[str, str]], chosen: dict[str, str], verdict: str
) -> None:
    request = {"toolCall": {"toolCallId": "t", "kind": kind}, "options": options}
    assert decide(request, frozenset({"execute"})) == ({"outcome": chosen}, verdict)


def test_a_terminals_output_keeps_its_tail_at_a_character_boundary() -> None:
    terminal = _Terminal(process=None, limit=4)  # type: ignore[arg-type]
    terminal.take("abé".encode())  # 4 bytes
    assert not terminal.truncated
    terminal.take("ééx".encode())  # 9 bytes in all: 5 go, the last in the middle of an é
    assert terminal.truncated and terminal.text() == "éx"


def config(tmp_path: Path, command: tuple[str, ...] = ("agent", "acp")) -> AcpConfig:
    state = str(tmp_path / "state.json")
    return AcpConfig(command=command, working_directory=str(tmp_path), state_file=state)


async def test_the_map_is_kept_for_the_next_run_and_only_for_the_same_agent(tmp_path: Path) -> None:
    first = SessionMap(config(tmp_path))
    await first.put("room", "s1")
    assert await SessionMap(config(tmp_path)).get("room") == "s1"
    assert await SessionMap(config(tmp_path, ("other",))).get("room") is None
    saved = json.loads((tmp_path / "state.json").read_text())
    assert saved == {
        "version": 1,
        "agent": {"command": ["agent", "acp"], "cwd": str(tmp_path)},
        "rooms": {"room": "s1"},
    }
    (tmp_path / "state.json").write_text("{not json")
    assert await SessionMap(config(tmp_path)).get("room") is None  # logged, not used


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({}, "BAND_ACP_COMMAND is required"),
        ({"BAND_ACP_COMMAND": "agent 'unclosed"}, "cannot be split"),
        ({"BAND_ACP_COMMAND": "agent", "BAND_ACP_CWD": "rel"}, "must be an absolute path"),
        ({"BAND_ACP_COMMAND": "agent", "BAND_ACP_ALLOW": "shell"}, "unknown ACP tool kind"),
        ({"BAND_ACP_COMMAND": "agent", "BAND_ACP_FS": "exec"}, "unknown ACP fs"),
        ({"BAND_ACP_COMMAND": "agent", "BAND_ACP_TERMINAL": "maybe"}, "on or off"),
        ({"BAND_ACP_COMMAND": "agent", "BAND_ACP_PERMISSIONS": "yes"}, "one of"),
        ({"BAND_ACP_COMMAND": "agent", "BAND_ACP_ASK_WITHIN": "-1"}, "BAND_ACP_ASK_WITHIN"),
    ],
)
def test_bad_settings_name_the_variable(env: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigurationError, match=says):
        AcpConfig.from_env(env)


def test_the_command_is_split_as_a_shell_would_and_run_without_one(tmp_path: Path) -> None:
    env = {
        "BAND_ACP_COMMAND": "npx '@google/gemini-cli' --acp",
        "BAND_ACP_CWD": str(tmp_path),
        "BAND_ACP_ALLOW": "Read, execute",
        "BAND_ACP_TERMINAL": "on",
        "BAND_ACP_PERMISSIONS": "ask",
        "BAND_ACP_ASK_WITHIN": "30",
    }
    config = AcpConfig.from_env(env)
    assert (config.permissions, config.ask_within) == ("ask", 30.0)
    assert config.command == ("npx", "@google/gemini-cli", "--acp")
    assert config.allow == {"read", "execute"} and config.terminal and config.fs == set()


def test_a_requests_options_become_one_word_choices_deny_last() -> None:
    def request(*kinds: str) -> dict[str, object]:
        options = [{"optionId": f"o-{kind}", "kind": kind} for kind in kinds]
        return {"toolCall": {"kind": "execute", "title": "t"}, "options": options}

    every = ("reject_once", "allow_always", "reject_always", "allow_once")
    assert options_for(request(*every)) == {
        "allow": ("o-allow_once", "allow_once"),
        "always": ("o-allow_always", "allow_always"),
        "never": ("o-reject_always", "reject_always"),
        "deny": ("o-reject_once", "reject_once"),
    }
    # no reject_once: deny is the reject_always; no reject at all: deny is `cancelled`
    assert options_for(request("allow_once", "reject_always"))["deny"] == (
        "o-reject_always",
        "reject_always",
    )
    assert list(options_for(request("allow_once"))) == ["allow", "deny"]
    assert options_for(request("allow_once"))["deny"] == (None, "reject_once")


def test_a_long_command_is_shortened_in_the_question_keeping_head_and_tail() -> None:
    command = "npm run " + "x" * 500 + " --final-flag"
    tool = {"kind": "execute", "title": "run it", "rawInput": {"command": command}}
    text = question_for({"toolCall": tool}, ("allow", "deny"))
    first = text.splitlines()[0]
    assert first.startswith("The coding agent asks to run (execute): run it — `npm run xxx")
    assert first.endswith("--final-flag`") and "…" in first and len(first) < 240
