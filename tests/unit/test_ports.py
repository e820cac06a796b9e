"""`free_port()` gives ports outside the range outgoing connections take theirs from."""

from __future__ import annotations

import socket

from ports import _ephemeral_low, free_port


def test_a_free_port_is_below_the_ephemeral_range_and_can_be_bound() -> None:
    low = _ephemeral_low()
    ports = {free_port() for _ in range(50)}
    assert all(1024 <= port < low for port in ports), sorted(ports)
    assert len(ports) > 1  # chosen at random, not one fixed port for every test
    for port in list(ports)[:5]:
        with socket.socket() as server:
            server.bind(("127.0.0.1", port))
