"""The docs runner fails a page that does not work as written (tests/docs/_docrun.py).

Small pages written here: a block with no doc-run comment, a command that fails, an
output that is not what the page says, a server that does not exit 0 on Ctrl-C, and
one that leaves a process behind — each must fail the page, and nothing it started
may outlive it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from ._docrun import parse, run_page

ROOT = Path(__file__).parents[2]


def page(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "page.md"
    path.write_text(text)
    return path


async def run(tmp_path: Path, text: str) -> list[str]:
    with trio.fail_after(30):
        return await run_page(parse(page(tmp_path, text)), tmp_path, ROOT, dict(os.environ))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_a_block_without_a_comment_fails_the_page(tmp_path: Path) -> None:
    text = "<!-- doc-run: shell=a -->\n```\necho one\n```\n\nthen\n\n```\necho two\n```\n"
    with pytest.raises(AssertionError, match=r"page.md:8: a code block with no"):
        parse(page(tmp_path, text))


async def test_a_page_that_works_passes_with_its_variables_kept(tmp_path: Path) -> None:
    text = (
        "<!-- doc-run: shell=a -->\n```\nX=hello\n```\n"
        '<!-- doc-run: shell=a expect="^hello world$" -->\n```\necho "$X world"\n```\n'
        "<!-- doc-run: file=f.txt -->\n```\none\n```\n"
        '<!-- doc-run: shell=b absent="two" -->\n```\ncat f.txt\n```\n'
    )
    transcript = await run(tmp_path, text)
    assert any("hello world" in part for part in transcript)


@pytest.mark.parametrize(
    ("block", "options", "says"),
    [
        ("false\necho after", "", "a command failed"),
        ("echo out", 'expect="not this"', "no 'not this'"),
        ("echo out", 'absent="out"', "'out' in"),
        ("exit_with() { return 3; }\nexit_with", "exit=1", "status 3, not 1"),
    ],
)
async def test_a_block_that_does_not_do_what_the_page_says_fails(
    tmp_path: Path, block: str, options: str, says: str
) -> None:
    text = f"<!-- doc-run: shell=a {options} -->\n```\n{block}\n```\n"
    with pytest.RaisesGroup(pytest.RaisesExc(AssertionError, match=says), flatten_subgroups=True):
        await run(tmp_path, text)


@pytest.mark.parametrize(
    ("sample", "says"),
    [
        ('{"model":"gpt-4o"}', 'the sample\'s "model": "gpt-4o" is not in'),
        ('{"status":"done","usage":{…}}', 'the sample\'s "usage" is not in'),
        ('{"settled":true}', 'the sample\'s "settled": true is not in'),
    ],
)
async def test_a_sample_that_is_not_what_was_printed_fails(
    tmp_path: Path, sample: str, says: str
) -> None:
    text = (
        "<!-- doc-run: shell=a -->\n```\n"
        """echo '{"run_id":"run_42","model":"band-trio","status":"done","settled":false}'"""
        "\n```\n<!-- doc-run: sample=a -->\n```\n{sample}\n```\n"
    )
    with pytest.RaisesGroup(pytest.RaisesExc(AssertionError, match=says), flatten_subgroups=True):
        await run(tmp_path, text.replace("{sample}", sample))


async def test_a_sample_of_what_was_printed_passes(tmp_path: Path) -> None:
    text = (
        "<!-- doc-run: shell=a -->\n```\n"
        """echo '{"run_id":"run_42","created_at":17.5,"model":"band-trio","stops":[1]}'"""
        '\n```\n<!-- doc-run: sample=a -->\n```\n{"run_id":"run_9…","created_at":1796.1,'
        '\n "model": "band-trio","stops":[…]}\n```\n'
    )
    await run(tmp_path, text)


SERVER = (
    "python3 -c 'import signal, sys, time;"
    " signal.signal(signal.SIGINT, lambda *_: sys.exit({code}));"
    ' print("ready", flush=True); time.sleep(60)\''
)


async def test_a_server_that_fails_its_ctrl_c_fails_the_page(tmp_path: Path) -> None:
    text = f'<!-- doc-run: shell=s bg ready="ready" -->\n```\n{SERVER.format(code=1)}\n```\n'
    with pytest.RaisesGroup(
        pytest.RaisesExc(AssertionError, match="status 1, not 0"), flatten_subgroups=True
    ):
        await run(tmp_path, text)


async def test_a_process_left_behind_fails_the_page_and_is_killed(tmp_path: Path) -> None:
    text = (
        "<!-- doc-run: shell=s -->\n```\nsleep 60 &\necho $! > left.pid\n```\n"
        f'<!-- doc-run: shell=t bg ready="ready" -->\n```\n{SERVER.format(code=0)}\n```\n'
    )
    with pytest.RaisesGroup(
        pytest.RaisesExc(AssertionError, match="left a process in its group"),
        flatten_subgroups=True,
    ):
        await run(tmp_path, text)
    assert not alive(int((tmp_path / "left.pid").read_text()))


async def test_a_server_that_ends_early_fails_at_the_next_step(tmp_path: Path) -> None:
    text = (
        '<!-- doc-run: shell=s bg -->\n```\necho "port in use"; false\n```\n'
        '<!-- doc-run: shell=a until="never" -->\n```\necho waiting\n```\n'
    )
    with pytest.RaisesGroup(
        pytest.RaisesExc(AssertionError, match="the command in shell s ended"),
        flatten_subgroups=True,
    ):
        await run(tmp_path, text)
