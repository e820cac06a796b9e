"""The public surface: what `import band_trio` offers, what importing a layer costs, and
docs/reference/api.md, which lists every public package's `__all__` (both ways)."""

from __future__ import annotations

import importlib
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import band_trio
import band_trio.runtime

API = Path(__file__).parents[2] / "docs" / "reference" / "api.md"


def _documented() -> tuple[dict[str, list[str]], list[str]]:
    """The names each `## `module`` section of api.md lists, and the internal packages."""
    text = API.read_text()
    sections = re.split(r"^## ", text, flags=re.MULTILINE)[1:]
    public: dict[str, list[str]] = {}
    internal: list[str] = []
    for section in sections:
        title, _, body = section.partition("\n")
        if title.strip() == "Internal":
            internal = re.findall(r"^\* `(band_trio\.[a-z_.]+)`", body, re.MULTILINE)
            continue
        module = title.strip().strip("`")
        public[module] = re.findall(r"^\| `([A-Za-z_][A-Za-z0-9_]*)` \|", body, re.MULTILINE)
    return public, internal


def test_the_api_reference_lists_each_public_package_s_all_exactly() -> None:
    public, _ = _documented()
    assert "band_trio" in public
    for module, names in public.items():
        exported = importlib.import_module(module).__all__
        assert names == list(exported), module  # the same names, in the same order


def test_every_subpackage_is_documented_as_public_or_internal() -> None:
    public, internal = _documented()
    packages = {
        f"band_trio.{m.name}"
        for m in pkgutil.iter_modules(band_trio.__path__)
        if not m.name.startswith("_") and m.name != "__main__"
    }
    unclassified = sorted(packages - set(public) - set(internal))
    assert unclassified == []
    assert set(internal) <= packages and not set(internal) & set(public)


def test_a_name_the_top_level_no_longer_holds_says_where_it_lives() -> None:
    for name, module in band_trio._MOVED.items():  # type: ignore[attr-defined]
        assert name in importlib.import_module(module).__all__, (name, module)
        with pytest.raises(ImportError, match=f"band_trio.{name} moved to {module}"):
            getattr(band_trio, name)
    code = "from band_trio import DemoAdapter"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "moved to band_trio.adapters: `from band_trio.adapters import DemoAdapter`" in (
        done.stderr
    )


def test_the_sans_io_layers_import_without_trio() -> None:
    code = (
        "import sys, band_trio, band_trio.wire, band_trio.errors, band_trio.policy\n"
        "heavy = {'trio', 'trio_websocket', 'httpx2', 'hypercorn'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
        "from band_trio import Turn\n"  # the contract owns cancel scopes: it needs trio
        "assert 'trio' in sys.modules\n"
        "from band_trio import Agent, StopResult\n"  # the runtime comes on first use
        "assert 'trio' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_every_public_name_resolves_and_nothing_else_does() -> None:
    for name in band_trio.__all__:
        assert getattr(band_trio, name) is not None, name
    assert set(band_trio.__all__) <= set(dir(band_trio))
    with pytest.raises(AttributeError, match="no attribute 'Room'"):
        band_trio.Room  # type: ignore[attr-defined]  # noqa: B018  # internal


def test_the_runtime_exports_only_what_users_need() -> None:
    assert sorted(band_trio.runtime.__all__) == [
        "AbortKind",
        "Agent",
        "Overrun",
        "RemoteStopStats",
        "RoomView",
        "SignalCounts",
        "StopResult",
        "UnsettledMark",
    ]
