"""Where a server may listen, and the secrets that guard one other machines can reach.

Every band-trio server binds loopback by default. Listening anywhere else is
an explicit choice (a flag, a config key) and, for a server that runs work for
its callers (the host, the runs API), needs a secret as well: without one,
anyone on the network could run turns. Each refusal is one line, which the
CLI prints before it exits 2.
"""

from __future__ import annotations

import ipaddress

from ..errors import ConfigurationError

__all__ = [
    "MIN_SECRET_LENGTH",
    "check_bind",
    "check_port",
    "check_secret",
    "is_loopback",
    "is_wildcard",
    "parse_listen",
]

MIN_SECRET_LENGTH = 16
"""Hermes refuses a runs API key shorter than this, even on loopback: so does every
band-trio secret (the runs API key, the host's token)."""


def is_loopback(host: str) -> bool:
    """`localhost`, `127.x.x.x` or `::1` (bracketed or not)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    """`0.0.0.0` or `::`: every interface of the machine."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def check_port(port: int) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigurationError(f"a port is a number from 0 to 65535, not {port!r}")
    return port


def parse_listen(value: str, what: str) -> tuple[str, int]:
    """`HOST:PORT` (`[::1]:8800` for IPv6) as (host, port), or one line saying why not."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or len(port) > 5 or int(port) > 65535:
        raise ConfigurationError(f"{what} must be HOST:PORT, not {value!r}")
    return host.strip("[]") if host.startswith("[") else host, int(port)


def check_bind(host: str, *, what: str, allow_remote: bool, opt_in: str) -> str:
    """`host`, if `what` may listen there: loopback always, another address only with
    `allow_remote` (the `opt_in` flag or key, named in the refusal)."""
    if not host or any(c.isspace() for c in host):
        raise ConfigurationError(f"{what}: {host!r} is not an address to listen on")
    if is_loopback(host) or allow_remote:
        return host
    raise ConfigurationError(
        f"{what} listens on loopback only: {host} would let other machines in "
        f"(give {opt_in} to mean it)"
    )


def check_secret(secret: str | None, *, what: str, how: str) -> str:
    """The secret, or one line saying why it will not do (`what`: "the host's token";
    `how`: where to give one)."""
    if not secret:
        raise ConfigurationError(
            f"{what} is missing: {how} (at least {MIN_SECRET_LENGTH} characters)"
        )
    if len(secret) < MIN_SECRET_LENGTH or any(c.isspace() or not c.isprintable() for c in secret):
        raise ConfigurationError(
            f"{what} must be at least {MIN_SECRET_LENGTH} printable characters "
            f"without spaces (got {len(secret)})"
        )
    return secret
