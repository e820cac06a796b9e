"""A reader's clone of band-trio, and the virtualenv `pip install -e '.[pytest]'` makes in it.

The virtualenv holds band-trio (the clone's `src`, with its entry points) and the
distributions its `pytest` extra requires, resolved from the metadata of the
environment these tests run in and linked from it: the same set `pip` would install
(none of the test extra's, pytest-timeout among them), without a registry or a
download, in well under a second.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

__all__ = ["copy_of_repository", "extra_venv", "requirements_of"]

NOT_IN_A_CLONE = shutil.ignore_patterns(
    ".git", ".venv", ".tools", "__pycache__", "*.egg-info", ".*_cache", ".hypothesis", "*.db",
    "build", "dist",
)  # fmt: skip
"""What `git clone` does not bring (.gitignore), or what is not part of the clone."""


def copy_of_repository(root: Path, to: Path) -> Path:
    """A copy of the repository at `root` as a fresh clone holds it (the working tree)."""
    shutil.copytree(root, to, ignore=NOT_IN_A_CLONE, symlinks=True)
    return to


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements_of(name: str, extras: set[str]) -> dict[str, metadata.Distribution]:
    """`name[extras]` and every distribution it requires, transitively, in this environment."""
    found: dict[str, metadata.Distribution] = {}
    asked: set[tuple[str, frozenset[str]]] = set()
    todo = [(name, frozenset(extras))]
    while todo:
        current, wanted = todo.pop()
        if (_key(current), wanted) in asked:
            continue
        asked.add((_key(current), wanted))
        dist = found.setdefault(_key(current), metadata.distribution(current))
        for text in dist.requires or []:
            requirement = Requirement(text)
            markers = [{"extra": extra} for extra in wanted or {""}]
            if requirement.marker is None or any(requirement.marker.evaluate(m) for m in markers):
                todo.append((requirement.name, frozenset(requirement.extras)))
    return found


def extra_venv(venv: Path, source: Path, extras: set[str]) -> Path:
    """A virtualenv at `venv` with band-trio installed from `source` (editable) with
    `extras`, and nothing else; its `bin`."""
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    for key, dist in requirements_of("band-trio", extras).items():
        if key == "band-trio":
            info = site / f"band_trio-{dist.version}.dist-info"
            info.mkdir()
            for name in ("METADATA", "entry_points.txt"):
                (info / name).write_text(dist.read_text(name) or "")
            (site / "band_trio.pth").write_text(f"{source / 'src'}\n")
        else:
            where = Path(str(dist.locate_file("")))
            tops = {Path(str(file)).parts[0] for file in dist.files or []}
            for top in sorted(tops - {"..", "__pycache__"}):
                if not (site / top).exists():
                    (site / top).symlink_to(where / top)
        for script in dist.entry_points.select(group="console_scripts"):
            module, _, attr = script.value.partition(":")
            path = venv / "bin" / script.name
            path.write_text(
                f"#!{python}\nimport sys\nfrom {module} import {attr}\nsys.exit({attr}())\n"
            )
            path.chmod(0o755)
    return venv / "bin"
