"""The docs and docstrings stand alone and read the same way throughout.

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
