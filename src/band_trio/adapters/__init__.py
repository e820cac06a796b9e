"""Reference adapters. They use only the contract (`band_trio.contract`)."""

from __future__ import annotations

from ._demo import DemoAdapter as DemoAdapter

__all__ = ["DemoAdapter"]
