"""Names a package exports but imports only when first asked for (PEP 562).

A command that runs one adapter, or serves no `/metrics`, should not pay for the
others' imports (the HTTP server, every adapter's client): each `band-trio`
process started about 0.1-0.15 s sooner without them. The package keeps its
names typed for mypy with `if TYPE_CHECKING:` imports beside its table.

    __getattr__, __dir__ = lazy(__name__, {"MetricsApp": "._endpoint"}, __all__)
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy"]


def lazy(
    package: str, where: Mapping[str, str], names: Sequence[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module `__getattr__` and `__dir__` of `package`, which exports `names`;
    `where` maps each lazy name to the module (relative to `package`) that holds it."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)  # asked once
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(names))

    return __getattr__, __dir__
