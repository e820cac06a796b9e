"""`band-trio demo` runs on the runtime dependencies alone, which is all `python3 dev.py
demo` installs (tests/unit/test_dev_script.py): the demo is a process here in which
every installed package outside band-trio's core dependencies (and theirs) cannot be
imported — pytest, stubllm, matplotlib, band-sdk and the rest of the extras."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import metadata

from packaging.requirements import Requirement

BLOCKER = """
import importlib.abc, json, sys
blocked = set(json.loads(sys.argv[1]))

class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"{name} is not a runtime dependency", name=name)
        return None

sys.meta_path.insert(0, Blocked())
from band_trio.cli import main
sys.exit(main(["demo"]))
"""


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_closure() -> set[str]:
    """band-trio and every distribution its core dependencies need, recursively."""
    seen: set[str] = set()
    todo = ["band-trio"]
    while todo:
        name = _normal(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        for line in metadata.requires(name) or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return seen


def test_the_demo_runs_with_only_the_runtime_importable() -> None:
    allowed = runtime_closure()
    assert {"trio", "hypercorn", "httpx2", "msgspec", "trio-websocket"} <= allowed
    blocked = sorted(
        module
        for module, dists in metadata.packages_distributions().items()
        if not any(_normal(dist) in allowed for dist in dists)
    )
    assert {"pytest", "stubllm", "matplotlib"} <= set(blocked)
    done = subprocess.run(
        [sys.executable, "-c", BLOCKER, json.dumps(blocked)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "agent stopped (graceful)" in done.stdout, done.stdout
