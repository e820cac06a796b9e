"""The benchmark scripts stay in step with the code they measure.

They subclass adapters to stamp their remote stops, and nothing else runs them in
the suite (a benchmark run takes minutes). A refactor that adds a parameter to an
overridden method leaves the script broken until someone measures again: the
OpenCode stop benchmark failed that way once (`_stop` gained `upstream`). This
test imports every script and holds each override to its base's parameters.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_bench_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


def _parameters(function: object) -> list[tuple[str, object]]:
    return [(p.name, p.kind) for p in inspect.signature(function).parameters.values()]  # type: ignore[arg-type]


def _overrides(module: ModuleType) -> list[tuple[str, object, object]]:
    """(name, override, base) for each method a script's class overrides from band_trio."""
    found = []
    for cls in vars(module).values():
        if not (inspect.isclass(cls) and cls.__module__ == module.__name__):
            continue
        for name, function in vars(cls).items():
            if not inspect.isfunction(function) or name.startswith("__"):
                continue
            for base in cls.__mro__[1:]:
                if base.__module__.startswith("band_trio") and name in vars(base):
                    found.append((f"{cls.__name__}.{name}", function, vars(base)[name]))
                    break
    return found


def test_there_are_scripts_with_overrides() -> None:
    """The check below sees the scripts (a wrong folder would make it vacuous)."""
    assert len(SCRIPTS) > 10
    assert any(_overrides(_load(BENCHMARKS / "stop_opencode.py")))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_override_keeps_its_bases_parameters(script: Path) -> None:
    module = _load(script)
    for name, override, base in _overrides(module):
        assert _parameters(override) == _parameters(base), f"{script.name}: {name}"
