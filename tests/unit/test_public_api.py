"""The public surface: what `import band_trio` offers, and what importing a layer costs."""

from __future__ import annotations

import subprocess
import sys

import pytest

import band_trio
import band_trio.runtime


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
