"""The docs and docstrings stand alone and read the same way throughout.

* Nothing cites the developers' notes outside the repository (the spec files a
  user of the package does not have): a rule a docstring relies on is written
  in the docstring or in docs/, and cited there.

* The how-tos spell commands one way: `band-trio …` and `python3 …` (the
  environment set up as each page says), never `.venv/bin/band-trio`,
  `.venv/bin/python` or a bare `python`, which Debian does not have.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
HOW_TOS = sorted((ROOT / "docs" / "how-to").glob("*.md"))


def _code(text: str) -> str:
    """What a reader would type: fenced blocks and inline `code` (wrapped or not)."""
    fence = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
    paragraphs = [p.replace("\n", " ") for p in fence.sub("", text).split("\n\n")]
    inline = [code for p in paragraphs for code in re.findall(r"`([^`]+)`", p)]
    return "\n".join(fence.findall(text) + inline)


@pytest.mark.parametrize("page", HOW_TOS, ids=lambda p: p.name)
def test_the_how_tos_spell_commands_one_way(page: Path) -> None:
    code = _code(page.read_text())
    assert ".venv/bin/band-trio" not in code
    assert ".venv/bin/python" not in code
    assert not re.search(r"(?<![\w/.-])python(?= )", code), "python3, not python"


_NOTES = ("semantics", "wire", "peers", "trio-practice", "floors")
CITATION = re.compile(
    r"\bspec/|shared/|\b(?:" + "|".join(_NOTES) + r")\.md\b|\b(?:semantics|wire|peers) ?§"
)
"""`spec/…`, `shared/…`, `semantics.md`, `wire.md §3`, `semantics §9`, …"""
CHECKED = ["src", "docs", "tests", "benchmarks", "README.md", "pyproject.toml", "dev.py"]


def _sources() -> list[Path]:
    found: list[Path] = []
    for name in CHECKED:
        where = ROOT / name
        files = [where] if where.is_file() else sorted(where.rglob("*"))
        found += [
            f for f in files
            if f.is_file() and f.suffix in (".py", ".md", ".toml", ".js", ".html", ".css")
            and "egg-info" not in f.parts and f != Path(__file__)  # this file names them
        ]  # fmt: skip
    return found


def test_nothing_cites_the_notes_outside_the_repository() -> None:
    cited = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in _sources()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if CITATION.search(line)
    ]
    assert cited == [], "\n".join(cited)


def test_the_citation_check_sees_each_form() -> None:
    for text in ("(spec/wire.md §3.6)", "semantics §9", "(wire.md, call 9)", "peers.md §1.8",
                 "/work/shared/notes", "trio-practice.md"):  # fmt: skip
        assert CITATION.search(text), text
    for text in ("RFC 9110 §5.6.2", "docs/reference/platform.md", "the wire layer"):
        assert not CITATION.search(text), text
