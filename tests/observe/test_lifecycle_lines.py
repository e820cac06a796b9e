"""What an operator reads at `--log-level INFO` (text, the default format), from a real
`band-trio agent` process: one line for each step of the agent's life — connected,
rooms joined, a turn started and ended (with its outcome and duration), a signal
applied, a reconnect with its reason — and no per-request httpx2 lines, which are
logged at DEBUG."""

from __future__ import annotations

import re

import trio
from observed_process import command
from test_agent_metrics_and_logs import holding

from band_trio.platform import Platform
from support import agent_env, status

DEADLINE = 30
LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (?P<level>[A-Z]+) (?P<logger>\S+): ")


async def test_info_shows_each_step_once_and_no_request_lines(platform: Platform) -> None:
    info = platform.info
    agent_id, room, user = info.agent_id, info.room_id, info.user_id
    assert agent_id and room and user
    args = ["--log-level", "INFO", "agent", "--adapter", "observed_adapter:make"]
    with trio.fail_after(DEADLINE):
        async with command(*args, env=agent_env(platform), metrics=False) as agent:
            lines = agent.stderr
            await lines.wait_for(lambda line: "joined 1 room(s) of 1" in line)
            answered = platform.post_message(room, user, "hello")
            await platform.wait_until(lambda: status(platform, answered) == "processed")
            held = platform.post_message(room, user, "hold")
            await lines.wait_for(holding(held))
            platform.send_control(agent_id, "interrupt", room_id=room, reason="enough")
            await platform.wait_until(lambda: status(platform, held) == "processed")
            assert platform.faults.drop_socket(agent_id)
            await lines.wait_for(lambda line: "joined 1 room(s) of 1" in line, count=2)
    text = [line for line in agent.stderr.lines if line and not line.startswith("band-trio ")]
    assert all(LINE.match(line) for line in text), text  # the text format, unchanged

    def only(pattern: str) -> str:
        found = [line for line in text if re.search(pattern, line)]
        assert len(found) == 1, (pattern, found)
        return found[0]

    assert "INFO band_trio.runtime.link: connected to ws://" in text[0]
    assert "INFO band_trio.runtime.link: joined 1 room(s) of 1" in text[1]
    only(rf"turn for {answered} started")
    assert re.search(r"ended: succeeded in \d+\.\d{3}s$", only(rf"turn for {answered} ended"))
    assert re.search(r"ended: aborted in \d+\.\d{3}s$", only(rf"turn for {held} ended"))
    assert "INFO band_trio.runtime.control: interrupt applied to room" in only("applied")
    assert only("applied").endswith(": enough (" + only("applied").rsplit("(", 1)[1])
    assert re.search(r"reconnecting in \d+\.\ds: dropped$", only("reconnecting"))
    assert not [line for line in text if "httpx" in line or "HTTP Request" in line]


async def test_debug_shows_the_request_lines_as_debug(platform: Platform) -> None:
    args = ["--log-level", "DEBUG", "agent"]
    with trio.fail_after(DEADLINE):
        async with command(*args, env=agent_env(platform), metrics=False) as agent:
            found = await agent.stderr.wait_for(lambda line: "HTTP Request" in line)
    assert " DEBUG band_trio.link.http: HTTP Request: GET /api/v1/agent/me 200" in found[0]
