"""A Ctrl-C in the first moments of `band-trio agent`, `platform` or `demo`: quiet, 130.

The command spends its first ~0.3 s importing (trio, httpx2, the runtime, the
platform), before it serves SIGINT itself; a SIGINT then printed a
`KeyboardInterrupt` traceback (2 of 40 trials, issue 38, item 7e). Here the signal
is sent at chosen points rather than at random moments: the process is the console
script's own two lines, and an import hook sends the process SIGINT (a real
signal, through Python's handler) when a named module is first imported.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import trio

INTERRUPT_AT = """\
import importlib.abc, os, signal, sys

class InterruptAt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == {module!r} and self in sys.meta_path:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, InterruptAt())
from band_trio.cli import main  # the console script `band-trio`, as pip writes it
sys.exit(main())
"""
AGENT = [
    "agent", "--agent-id", "a", "--api-key", "k",
    "--rest-url", "http://127.0.0.1:9", "--ws-url", "ws://127.0.0.1:9/",
]  # fmt: skip


@pytest.mark.parametrize(
    ("module", "args"),
    [
        ("argparse", ["platform"]),  # the parser, at the very start of `main`
        ("trio", AGENT),  # the commands' modules
        ("httpx2", AGENT),
        ("band_trio.runtime", AGENT),
        ("band_trio.adapters._demo", AGENT),  # the agent's default adapter, after parsing
        ("hypercorn", ["platform"]),  # inside trio.run, before the signals are taken
        ("band_trio.platform", ["demo"]),
        ("band_trio.testing", ["demo"]),
        ("wsproto.utilities", ["demo"]),  # the demo's agent connecting: its server's task
    ],
)
async def test_a_sigint_early_in_start_up_exits_130_without_a_traceback(
    module: str, args: list[str]
) -> None:
    command = [sys.executable, "-c", INTERRUPT_AT.format(module=module), *args]
    with trio.fail_after(30):
        done = await trio.run_process(
            command, capture_stdout=True, capture_stderr=True, check=False
        )
    err = done.stderr.decode()
    assert "Traceback" not in err, err
    assert done.returncode == 130, (done.returncode, err)
    assert err.strip() == "band-trio: interrupted", err


def test_the_command_package_loads_nothing_heavy_before_main() -> None:
    """What runs before `main` can catch a Ctrl-C is kept small: no trio, no httpx2, no
    command module is imported by `import band_trio.cli`."""
    code = (
        "import sys, band_trio.cli; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('trio', 'httpx2', "
        "'hypercorn', 'argparse') or m.startswith('band_trio.cli._') and "
        "m != 'band_trio.cli._exits'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    assert done.stdout.decode().strip() == "[]"
