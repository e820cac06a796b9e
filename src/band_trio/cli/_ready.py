"""Reading the ready file `band-trio platform --ready-file F` writes."""

from __future__ import annotations

from pathlib import Path

import msgspec

from .. import errors
from ..wire.admin import ReadyInfo

__all__ = ["read_ready_file"]


def read_ready_file(path: Path) -> ReadyInfo:
    """The platform's ready info, or a `ConfigurationError` saying why it cannot be read."""
    try:
        return msgspec.json.decode(path.read_bytes(), type=ReadyInfo)
    except OSError as exc:
        raise errors.ConfigurationError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except (msgspec.DecodeError, RecursionError) as exc:
        raise errors.ConfigurationError(f"{path} is not a ready file: {exc}") from exc
