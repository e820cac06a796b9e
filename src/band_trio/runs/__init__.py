"""The runs API: start a run over HTTP, stream its events, stop it for real."""

from __future__ import annotations

from ._policy import RunsPolicy as RunsPolicy

__all__ = ["RunsPolicy"]
