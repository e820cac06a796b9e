"""Run a docs page's code blocks as a reader would: each in a real shell, in order.

Every fenced block of a page that is run is preceded by an HTML comment telling how
(invisible where the page is rendered):

    <!-- doc-run: shell=NAME [bg [ready=REGEX]] [expect=REGEX] [absent=REGEX] [until=REGEX]
                  [exit=N] [pause=SECONDS] -->
    <!-- doc-run: file=PATH | append=PATH | patch=PATH from=TEXT [to=TEXT] -->
    <!-- doc-run: skip=WHY -->
    <!-- doc-run: sample=NAME -->

and a comment with no block after it is a step of its own:

    <!-- doc-run: stop=NAME [exit=N] -->     Ctrl-C in that shell (SIGINT to its group)
    <!-- doc-run: restore=PATH -->           undo the last file= / append= / patch= of PATH
    <!-- doc-run: watch=NAME until=REGEX --> look at that shell until its output shows it
    <!-- doc-run page: port=8642 path=/tmp/band.json -->

A block without a comment fails the page: nothing is left out by accident. `shell=`
blocks are typed into a `bash` of that name (one per name, kept, so variables carry
over, each the leader of its own process group, reading nothing from the terminal;
the shell `clone` in the repository's folder, the others in the page's own);
`bg` leaves the block running (waiting for `ready` if given); the others wait for
its end, need every command in them to succeed (or the last one to exit `exit`), and
their output to match `expect` and not `absent`; `until` types the block again until
its output matches (a read, as a reader repeats it); `pause` types it only after
that long, as a reader would (a stop that must still find the work going when a
person types it, not only at a test's speed). A `sample=` block shows what the last
block of that shell printed: each `"field":` of it must be in that output, with the
same value where the sample gives one (a string with no `…` in it, true, false, null;
a number, a string with `…`, a list or an object: the field only). A page's fixed ports are
replaced by free ones, and its paths under /tmp by the test's folder, so pages run
side by side with anything else. At the end every shell still running gets Ctrl-C
and must exit 0, and no process of any shell's group may be left; whatever is, is
killed by its group id.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import trio

from ports import free_port

__all__ = ["Page", "Step", "parse", "run_page"]

ANNOTATION = re.compile(r"<!--\s*doc-run(?P<page> page)?:(?P<body>.*?)-->", re.DOTALL)
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)(?P<info>[^\n]*)$", re.MULTILINE)
STEP_DEADLINE = 60.0
"""A step that takes longer than this fails the page (conformance runs take ~6 s)."""
STOP_DEADLINE = 20.0
FIELD = re.compile(r'"(?P<key>\w+)":\s*(?P<value>"[^"]*"|true|false|null)?')
"""A JSON field of a sample, with its value where the sample's value is to be the same."""


@dataclass
class Step:
    line: int
    options: dict[str, str]
    text: str | None = None
    """The block's text (None: a step of its own)."""

    def where(self, page: Path) -> str:
        return f"{page.name}:{self.line}"


@dataclass
class Page:
    path: Path
    options: list[tuple[str, str]]
    steps: list[Step]


def _options(body: str, line: int, page: Path) -> dict[str, str]:
    options: dict[str, str] = {}
    for word in shlex.split(body):
        key, sep, value = word.partition("=")
        options[key] = value if sep else ""
    known = {
        "shell", "bg", "ready", "expect", "absent", "until", "exit", "file", "append", "patch",
        "from", "to", "skip", "stop", "restore", "watch", "pause", "sample",
    }  # fmt: skip
    unknown = set(options) - known
    assert not unknown, f"{page.name}:{line}: unknown doc-run options {sorted(unknown)}"
    return options


def parse(path: Path) -> Page:
    """The page's steps, each fenced block with the comment before it."""
    text = path.read_text()
    fences = list(FENCE.finditer(text))
    blocks: list[tuple[int, int, str]] = []  # (start of the opening fence, end of the close, body)
    index = 0
    while index < len(fences):
        opening = fences[index]
        closing = next(
            (
                f
                for f in fences[index + 1 :]
                if f["fence"].startswith(opening["fence"][0])
                and len(f["fence"]) >= len(opening["fence"])
                and not f["info"].strip()
            ),
            None,
        )
        assert closing is not None, f"{path.name}: a fence that never closes"
        indent = len(opening["indent"])
        body_lines = text[opening.end() + 1 : closing.start()].split("\n")[:-1]
        body = "\n".join(line[indent:] for line in body_lines) + "\n"
        blocks.append((opening.start(), closing.end(), body))
        index = fences.index(closing) + 1
    page_options: list[tuple[str, str]] = []
    steps: list[Step] = []
    consumed: set[int] = set()
    for note in ANNOTATION.finditer(text):
        line = text.count("\n", 0, note.start()) + 1
        if note["page"]:
            for word in shlex.split(note["body"]):
                key, _, value = word.partition("=")
                page_options.append((key, value))
            continue
        options = _options(note["body"], line, path)
        block = next((b for b in blocks if b[0] >= note.end()), None)
        attached = block is not None and not text[note.end() : block[0]].strip()
        if attached and block is not None:
            consumed.add(block[0])
            steps.append(Step(line, options, block[2]))
        else:
            steps.append(Step(line, options))
    for start, _, _ in blocks:
        line = text.count("\n", 0, start) + 1
        assert start in consumed, (
            f"{path.name}:{line}: a code block with no <!-- doc-run: ... --> comment before it"
        )
    return Page(path, page_options, steps)


@dataclass
class Shell:
    """One `bash` a reader types into: the leader of its own process group."""

    name: str
    process: trio.Process
    token: str = field(default_factory=lambda: f"__DOCRUN_{uuid.uuid4().hex}__")
    output: bytearray = field(default_factory=bytearray)
    grew: trio.Event = field(default_factory=trio.Event)
    running: int | None = None
    """Where the output of the `bg` block still running in it starts."""
    eof: bool = False

    async def pump(self) -> None:
        assert self.process.stdout is not None
        async with self.process.stdout:
            while chunk := await self.process.stdout.receive_some(65536):
                self.output += chunk
                self.grew.set()
                self.grew = trio.Event()
        self.eof = True
        self.grew.set()

    def text(self, since: int = 0) -> str:
        return self.output[since:].decode(errors="replace")

    async def wait_for(self, pattern: re.Pattern[str], since: int) -> re.Match[str]:
        while True:
            found = pattern.search(self.text(since))
            if found:
                return found
            if self.eof:
                status = await self.process.wait()
                raise AssertionError(
                    f"shell {self.name} ended (status {status}) before "
                    f"{pattern.pattern!r}:\n{self.text(since)}"
                )
            await self.grew.wait()

    async def type(self, text: str) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(text.encode())

    async def start(self, block: str) -> int:
        """Type `block` (its commands reading nothing from the terminal) and its end
        mark; the offset its output starts at."""
        since = len(self.output)
        await self.type(f"{{\n{block}}} < /dev/null\nprintf '\\n{self.token} %s\\n' \"$?\"\n")
        return since

    async def finish(self, since: int) -> tuple[int, str]:
        """Wait for the end mark of the block typed at `since`: its status and output."""
        mark = re.compile(rf"\n{self.token} (\d+)\n")
        found = await self.wait_for(mark, since)
        return int(found[1]), self.text(since)[: found.start()]

    def members(self) -> list[int]:
        """The live processes of this shell's group (zombies are gone)."""
        return group_members(self.process.pid)

    def signal_group(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signum)

    async def end_group(self) -> None:
        """SIGKILL to the group, then wait for each member's exit (its pidfd)."""
        self.signal_group(signal.SIGKILL)
        if self.process.returncode is None:
            self.process.kill()
        with trio.move_on_after(STOP_DEADLINE):
            await self.process.wait()
            for pid in self.members():
                try:
                    pidfd = os.pidfd_open(pid)
                except ProcessLookupError:
                    continue
                try:
                    if pid in self.members():
                        await trio.lowlevel.wait_readable(pidfd)
                finally:
                    os.close(pidfd)


def group_members(pgid: int) -> list[int]:
    """Live processes whose process group is `pgid`, read from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry))
    return found


@dataclass
class Run:
    page: Page
    workdir: Path
    repo: Path
    env: dict[str, str]
    nursery: trio.Nursery
    shells: dict[str, Shell] = field(default_factory=dict)
    replacements: list[tuple[str, str]] = field(default_factory=list)
    history: dict[Path, list[str | None]] = field(default_factory=dict)
    transcript: list[str] = field(default_factory=list)
    printed: dict[str, str] = field(default_factory=dict)
    """What the last block typed into each shell printed (for `sample=`)."""

    def __post_init__(self) -> None:
        for key, value in self.page.options:
            if key == "port":
                self.replacements.append((value, str(free_port())))
            elif key == "path":
                self.replacements.append((value, str(self.workdir / Path(value).name)))
            else:
                raise AssertionError(f"{self.page.path.name}: unknown page option {key!r}")

    def rewrite(self, text: str) -> str:
        for old, new in self.replacements:
            text = text.replace(old, new)
        return text

    def pattern(self, regex: str) -> re.Pattern[str]:
        """A page's regex (its ports and paths rewritten); `.` matches a newline too."""
        return re.compile(self.rewrite(regex), re.DOTALL)

    async def shell(self, name: str) -> Shell:
        if name not in self.shells:
            process = await trio.lowlevel.open_process(
                ["bash", "--norc", "--noprofile"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=self.repo if name == "clone" else self.workdir,
                env=self.env,
                start_new_session=True,
            )
            shell = Shell(name, process)
            self.shells[name] = shell
            self.nursery.start_soon(shell.pump)
            failed = f"{shell.token}-FAILED"
            await shell.type(f'trap \'printf "\\n{failed} %s: %s\\n" "$?" "$BASH_COMMAND"\' ERR\n')
        return self.shells[name]

    def _file(self, options: dict[str, str], text: str) -> None:
        name = options.get("file") or options.get("append") or options["patch"]
        path = self.workdir / name
        before = path.read_text() if path.exists() else None
        self.history.setdefault(path, []).append(before)
        if "file" in options:
            path.write_text(text)
        elif "append" in options:
            path.write_text((before or "") + "\n\n" + text)
        else:
            assert before is not None, f"patch of {name}, which does not exist"
            lines = before.split("\n")
            first = next(i for i, line in enumerate(lines) if options["from"] in line)
            end = options.get("to", options["from"])
            last = next(i for i in range(first, len(lines)) if end in lines[i])
            lines[first : last + 1] = text.rstrip("\n").split("\n")
            path.write_text("\n".join(lines))

    async def step(self, step: Step) -> None:
        options = step.options
        where = step.where(self.page.path)
        if "skip" in options:
            assert options["skip"], f"{where}: skip= needs a reason"
            return
        if "restore" in options:
            path = self.workdir / options["restore"]
            before = self.history[path].pop()
            if before is None:
                path.unlink()
            else:
                path.write_text(before)
            return
        if "watch" in options:
            await self.wait_for(self.shells[options["watch"]], options["until"], 0, where)
            return
        if "stop" in options:
            await self.stop(self.shells[options["stop"]], int(options.get("exit", "0")), where)
            return
        assert step.text is not None, f"{where}: a doc-run step with nothing to do"
        text = self.rewrite(step.text)
        if {"file", "append", "patch"} & set(options):
            self._file(options, text)
            return
        if "sample" in options:
            self.check_sample(text, options["sample"], where)
            return
        assert "shell" in options, f"{where}: a block needs shell=, file=, append=, patch= or skip="
        shell = await self.shell(options["shell"])
        assert shell.running is None, f"{where}: shell {shell.name} still runs a command"
        self.transcript.append(f"--- {where} in shell {shell.name}:\n{text}")
        if "pause" in options:
            await trio.sleep(float(options["pause"]))  # a reader's pace, not a wait for an event
        if "bg" in options:
            shell.running = await shell.start(text)
            if "ready" in options:
                await self.wait_for(shell, options["ready"], shell.running, where)
            self.check_running(where)
            return
        with trio.fail_after(STEP_DEADLINE):
            while True:
                status, output = await shell.finish(await shell.start(text))
                self.transcript.append(output)
                self.printed[shell.name] = output
                if "until" not in options or self.pattern(options["until"]).search(output):
                    break
                self.check_running(where)
                await trio.sleep(0.2)  # a reader typing the same read again
        failed = [line for line in output.splitlines() if line.startswith(f"{shell.token}-FAILED")]
        want = int(options.get("exit", "0"))
        assert status == want, f"{where}: status {status}, not {want}:\n{output}"
        assert want != 0 or not failed, f"{where}: a command failed: {failed}\n{output}"
        if "expect" in options:
            pattern = self.pattern(options["expect"])
            assert pattern.search(output), f"{where}: no {pattern.pattern!r} in:\n{output}"
        if "absent" in options:
            pattern = self.pattern(options["absent"])
            assert not pattern.search(output), f"{where}: {pattern.pattern!r} in:\n{output}"

    def check_sample(self, sample: str, name: str, where: str) -> None:
        """Each JSON field of `sample` is in what shell `name` printed last, with the
        sample's value where it gives one."""
        assert name in self.printed, f"{where}: a sample of shell {name}, which printed nothing"
        output = self.printed[name]
        fields = list(FIELD.finditer(sample))
        assert fields, f"{where}: a sample with no JSON field in it"
        for found in fields:
            key, value = found["key"], found["value"]
            if value is not None and "…" not in value:
                want, shown = rf'"{key}":\s*{re.escape(value)}', f'"{key}": {value}'
            else:
                want, shown = rf'"{key}":', f'"{key}"'
            assert re.search(want, output), (
                f"{where}: the sample's {shown} is not in what shell {name} printed:\n{output}"
            )

    async def wait_for(self, shell: Shell, regex: str, since: int, where: str) -> None:
        """Until `shell`'s output from `since` on matches `regex`, within the deadline."""
        pattern = self.pattern(regex)
        with trio.move_on_after(STEP_DEADLINE):
            await shell.wait_for(pattern, since)
            return
        raise AssertionError(
            f"{where}: no {pattern.pattern!r} from shell {shell.name} within {STEP_DEADLINE} s:"
            f"\n{shell.text(since)}"
        )

    def check_running(self, where: str) -> None:
        """Every `bg` command still runs: one that ended fails the page at once."""
        for shell in self.shells.values():
            if shell.running is not None:
                ended = re.search(rf"\n{shell.token} (\d+)\n", shell.text(shell.running))
                assert ended is None, (
                    f"{where}: the command in shell {shell.name} ended (status {ended[1]}):\n"
                    f"{shell.text(shell.running)}"
                )

    async def stop(self, shell: Shell, want: int, where: str) -> None:
        """Ctrl-C in `shell`: SIGINT to its process group; its command must end with `want`."""
        assert shell.running is not None, f"{where}: nothing runs in shell {shell.name}"
        shell.signal_group(signal.SIGINT)
        with trio.fail_after(STOP_DEADLINE):
            status, output = await shell.finish(shell.running)
        shell.running = None
        self.transcript.append(output)
        assert status == want, (
            f"{where}: Ctrl-C in {shell.name}: status {status}, not {want}:\n{output}"
        )

    async def close(self) -> list[str]:
        """Ctrl-C in every shell still running, the last one opened first (as a reader
        ends an agent before its platform: an agent whose reply waits for a platform
        stopped under it waits out its shutdown grace), then end each shell; what was
        left."""
        problems: list[str] = []
        for shell in reversed(self.shells.values()):
            if shell.running is not None:
                try:
                    await self.stop(shell, 0, f"end of {self.page.path.name}")
                except (AssertionError, trio.TooSlowError) as exc:
                    problems.append(f"{shell.name}: {exc!r}")
            if shell.process.returncode is None:
                assert shell.process.stdin is not None
                await shell.process.stdin.aclose()
                with trio.move_on_after(STOP_DEADLINE):
                    await shell.process.wait()
            left = shell.members()
            if left:
                problems.append(f"shell {shell.name} left a process in its group: {left}")
        return problems


async def run_page(page: Page, workdir: Path, repo: Path, env: dict[str, str]) -> list[str]:
    """Run every step of `page` in `workdir`; the transcript (for a failure's message)."""
    async with trio.open_nursery() as nursery:
        run = Run(page, workdir, repo, env, nursery)
        try:
            for step in page.steps:
                await run.step(step)
            problems = await run.close()
            assert not problems, problems
        finally:
            with trio.CancelScope(shield=True):
                for shell in run.shells.values():
                    await shell.end_group()
    return run.transcript
