"""The bridge's configuration file (TOML or JSON), read and checked in one place.

    [bridge]                       # optional
    health = "127.0.0.1:8765"      # GET /health; "" (the default) serves none
    allow_remote = false           # true: health may listen on a non-loopback address
    policy = { max_forwards = 32, max_connects = 32 }     # BridgePolicy fields, optional
    rest_url = "http://127.0.0.1:4000"                   # defaults for every identity
    ws_url = "ws://127.0.0.1:4000/api/v1/socket/websocket"

    [[identity]]
    agent_id = "AGENT"
    api_key_env = "SUPPORT_KEY"    # or api_key = "..." (the environment is better)
    target = { type = "http", url = "http://127.0.0.1:9000/band", headers = {} }
    # a `band-trio host` behind it: settle = "target" and its token, from
    # token_env = "HOST_TOKEN" or token_file = "host.token" (or token = "...")
    # or { type = "a2a", url = "http://127.0.0.1:9999/" }
    # or { type = "command", argv = ["./handle-event"], cwd = "." }
    # every target: settle = "bridge" (the default) or "target" (`band-trio host`)

Every mistake is one `ConfigurationError` line naming the file and the key
(`bridge.toml: $.identity[1].target.url: expected str, got int`), which the
CLI prints and exits 2 with: a bad file is never a traceback.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec

from .._ranges import DAY, GIB, HOUR, Range, count, seconds
from ..errors import ConfigurationError
from ..link import check_rest_url, check_ws_url
from ..policy import COLLECTOR_THRESHOLD_MAX
from ..server import check_bind, parse_listen
from ._policy import BridgePolicy

__all__ = [
    "POLICY_RANGES",
    "A2ATargetConfig",
    "BridgeConfig",
    "CommandTargetConfig",
    "HttpTargetConfig",
    "IdentityConfig",
    "Settle",
    "TargetConfig",
    "load_config",
    "parse_config",
]


Settle = Literal["bridge", "target"]
"""Who claims and settles a forwarded message on the platform. `"bridge"`: the
bridge claims it (`/processing`) before the forward and marks it `processed` once
the target took it — a target that knows nothing of Band. `"target"`: the target
does both itself, as `band-trio host` does (the bridge would find it settled)."""


class HttpTargetConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="http"):
    """POST each envelope as JSON to `url`; any 2xx is a delivered forward.

    `token` is sent as `Authorization: Bearer TOKEN` (what `band-trio host` checks);
    a file gives it as `token_env` or `token_file` (read when the file is loaded) or
    `token`. A `settle = "target"` target is a host, so the file must give one."""

    url: str
    headers: dict[str, str] = {}
    settle: Settle = "bridge"
    token: str | None = None
    token_env: str | None = None
    token_file: str | None = None

    def __repr__(self) -> str:  # the token never reaches a log line
        token = None if self.token is None else "<hidden>"
        return f"HttpTargetConfig(url={self.url!r}, settle={self.settle!r}, token={token})"


class A2ATargetConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="a2a"):
    """Send each message to an A2A agent through the A2A adapter; its answer is posted
    to the room as the identity, and a cancelled forward cancels the A2A task."""

    url: str
    streaming: bool | None = None
    settle: Settle = "bridge"


class CommandTargetConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="command"):
    """Run `argv` per envelope, the envelope on stdin; exit 0 is a delivered forward.
    A cancelled forward ends the command's whole process group."""

    argv: list[str]
    cwd: str | None = None
    env: dict[str, str] | None = None
    settle: Settle = "bridge"


TargetConfig = HttpTargetConfig | A2ATargetConfig | CommandTargetConfig


class _Identity(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    agent_id: str
    target: TargetConfig
    api_key: str | None = None
    api_key_env: str | None = None
    rest_url: str | None = None
    ws_url: str | None = None
    name: str | None = None


class _Policy(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`[bridge.policy]`: every number of `BridgePolicy` (a test keeps the two in step);
    the host's own (`HOST_ONLY`) are refused by name, and its `server` bounds are not
    set from the file."""

    max_forwards: int | None = None
    max_connects: int | None = None
    forward_connect: float | None = None
    forward_deadline: float | None = None
    target_connections: int | None = None
    forwarded_memory: int | None = None
    room_queue: int | None = None
    shutdown_grace: float | None = None
    health_grace: float | None = None
    host_max_body: int | None = None
    target_max_body: int | None = None
    host_rooms: int | None = None
    host_lookup_pages: int | None = None
    retry_first: float | None = None
    retry_max: float | None = None
    forward_attempts: int | None = None
    collector_threshold: int | None = None


class _Bridge(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    health: str = ""
    allow_remote: bool = False
    rest_url: str | None = None
    ws_url: str | None = None
    policy: _Policy = _Policy()


class _File(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    identity: list[_Identity]
    bridge: _Bridge = _Bridge()


@dataclass(frozen=True, slots=True)
class IdentityConfig:
    """One agent identity the bridge subscribes, and where its events go."""

    name: str
    agent_id: str
    api_key: str = field(repr=False)
    rest_url: str
    ws_url: str
    target: TargetConfig


@dataclass(frozen=True, slots=True)
class BridgeConfig:
    identities: tuple[IdentityConfig, ...]
    health: tuple[str, int] | None = None
    """Where `GET /health` is served (host, port; port 0 picks one), if anywhere."""
    policy: BridgePolicy = field(default_factory=BridgePolicy)
    """`[bridge.policy]`: the `BridgePolicy` fields given, the defaults for the rest."""
    allow_remote: bool = False
    """`health` may listen on a non-loopback address (`[bridge] allow_remote = true`)."""


def load_config(path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> BridgeConfig:
    """Read and check `path` (`.toml`, or JSON for any other name). A `token_file`
    is read relative to the file's folder."""
    where = Path(path)
    try:
        text = where.read_bytes()
    except OSError as exc:
        raise ConfigurationError(f"cannot read {where}: {exc.strerror or exc}") from None
    try:
        if where.suffix == ".toml":
            data: Any = tomllib.loads(text.decode("utf-8"))
        else:
            data = json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"{where.name}: not valid {_kind(where)}: {exc}") from None
    except RecursionError:  # both parsers recurse into nested arrays and tables
        raise ConfigurationError(
            f"{where.name}: not valid {_kind(where)}: nested too deeply"
        ) from None
    return parse_config(
        data, source=where.name, env=os.environ if env is None else env, folder=where.parent
    )


def _kind(path: Path) -> str:
    return "TOML" if path.suffix == ".toml" else "JSON"


def parse_config(
    data: Any,
    *,
    source: str = "config",
    env: Mapping[str, str] | None = None,
    folder: Path | None = None,
) -> BridgeConfig:
    """Check already-parsed configuration data (see the module docstring); a relative
    `token_file` is read from `folder` (the working directory if None)."""
    env = os.environ if env is None else env
    try:
        raw = msgspec.convert(data, _File)
    except msgspec.ValidationError as exc:
        raise ConfigurationError(f"{source}: {_lower_first(str(exc))}") from None
    if not raw.identity:
        raise ConfigurationError(f"{source}: no [[identity]]: nothing to bridge")
    identities = []
    agents: set[str] = set()
    names: set[str] = set()
    for index, item in enumerate(raw.identity):
        at = f"{source}: $.identity[{index}]"
        identity = _identity(item, raw.bridge, env, at, folder or Path.cwd())
        if identity.agent_id in agents:
            raise ConfigurationError(f"{at}.agent_id: {identity.agent_id} is bridged twice")
        if identity.name in names:
            raise ConfigurationError(
                f"{at}.name: {identity.name!r} is the name of another identity: "
                "give each its own (the name defaults to the agent id)"
            )
        agents.add(identity.agent_id)
        names.add(identity.name)
        identities.append(identity)
    return BridgeConfig(
        tuple(identities),
        _health(raw.bridge.health, raw.bridge.allow_remote, source),
        _policy(raw.bridge.policy, source),
        allow_remote=raw.bridge.allow_remote,
    )


POLICY_RANGES: Mapping[str, Range] = {
    "max_forwards": count(10_000),
    "max_connects": count(10_000),
    "forward_connect": seconds(HOUR, above=True),
    "forward_deadline": seconds(DAY, above=True),
    "target_connections": count(10_000),
    "forwarded_memory": count(10_000_000),
    "room_queue": count(1_000_000, low=2),
    "shutdown_grace": seconds(HOUR, above=True),
    "health_grace": seconds(HOUR, above=True),
    "host_max_body": count(GIB),
    "target_max_body": count(GIB),
    "host_rooms": count(1_000_000),
    "host_lookup_pages": count(1000),
    "retry_first": seconds(HOUR, above=True),
    "retry_max": seconds(DAY, above=True),
    "forward_attempts": count(1000),
    "collector_threshold": count(COLLECTOR_THRESHOLD_MAX),
}
"""What each `[bridge.policy]` number may be (docs/how-to/bridge.md): finite and
bounded, so a file cannot turn a deadline or a cap off (`shutdown_grace = inf`,
`room_queue = 9223372036854775807`). Leaving `forward_deadline` out keeps the
default, no deadline: a stop, not a clock, ends a turn."""

HOST_ONLY = ("host_max_body", "host_rooms", "host_lookup_pages")
"""`BridgePolicy` fields only `band-trio host` reads (`HostApp(bridge_policy=...)`):
refused in a bridge's file, where they would change nothing."""


def _policy(raw: _Policy, source: str) -> BridgePolicy:
    given = {name: getattr(raw, name) for name in raw.__struct_fields__}
    for name in HOST_ONLY:
        if given[name] is not None:
            raise ConfigurationError(
                f"{source}: $.bridge.policy.{name}: a setting of the host (band-trio host), "
                "not of the bridge"
            )
    for name, value in given.items():
        if value is not None and value not in POLICY_RANGES[name]:
            raise ConfigurationError(
                f"{source}: $.bridge.policy.{name}: must be {POLICY_RANGES[name]}, not {value!r}"
            )
    try:
        return BridgePolicy(**{k: v for k, v in given.items() if v is not None})
    except ValueError as exc:
        raise ConfigurationError(f"{source}: $.bridge.policy: {exc}") from None


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def _identity(
    item: _Identity, bridge: _Bridge, env: Mapping[str, str], at: str, folder: Path
) -> IdentityConfig:
    if not item.agent_id:
        raise ConfigurationError(f"{at}.agent_id: must not be empty")
    if (item.api_key is None) == (item.api_key_env is None):
        raise ConfigurationError(f"{at}: give exactly one of api_key and api_key_env")
    key = item.api_key
    if item.api_key_env is not None:
        key = env.get(item.api_key_env)
        if not key:
            raise ConfigurationError(f"{at}.api_key_env: ${item.api_key_env} is not set")
    if not key:
        raise ConfigurationError(f"{at}.api_key: must not be empty")
    rest_url = item.rest_url or bridge.rest_url
    ws_url = item.ws_url or bridge.ws_url
    for field_name, url, check, kind in (
        ("rest_url", rest_url, check_rest_url, "an http(s)"),
        ("ws_url", ws_url, check_ws_url, "a ws(s)"),
    ):
        if not url:
            raise ConfigurationError(f"{at}.{field_name}: {kind} URL is required")
        try:
            check(url)
        except ConfigurationError as exc:
            raise ConfigurationError(f"{at}.{field_name}: {exc}") from None
    target = _check_target(item.target, f"{at}.target", env, folder)
    assert rest_url and ws_url  # checked above
    return IdentityConfig(
        name=item.name or item.agent_id,
        agent_id=item.agent_id,
        api_key=key,
        rest_url=rest_url,
        ws_url=ws_url,
        target=target,
    )


def _check_target(
    target: TargetConfig, at: str, env: Mapping[str, str], folder: Path
) -> TargetConfig:
    if isinstance(target, HttpTargetConfig | A2ATargetConfig):
        if not target.url.startswith(("http://", "https://")):
            raise ConfigurationError(f"{at}.url: an http(s) URL is required, not {target.url!r}")
    elif not target.argv or not all(target.argv):
        raise ConfigurationError(f"{at}.argv: a command (a non-empty list of words) is required")
    if isinstance(target, HttpTargetConfig):
        _check_headers(target.headers, f"{at}.headers")
        return _with_token(target, at, env, folder)
    return target


_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
"""The characters of an HTTP field name (RFC 9110 §5.6.2 `token`)."""
_SET_BY_THE_BRIDGE = frozenset(("content-type", "content-length", "transfer-encoding"))


def _check_headers(headers: Mapping[str, str], at: str) -> None:
    """Refuse, at load, a header no forward could send: a name that is not an HTTP
    token, a value with a control character (CR/LF would split the request) or outside
    printable ASCII, or one the bridge sets itself. Otherwise every forward fails."""
    for name, value in headers.items():
        if not name or not set(name) <= _TOKEN:
            raise ConfigurationError(f"{at}: {name!r} is not an HTTP header name")
        if name.lower() in _SET_BY_THE_BRIDGE:
            raise ConfigurationError(f"{at}.{name}: the bridge sets this header itself")
        if any(not (" " <= c <= "~" or c == "\t") for c in value):
            raise ConfigurationError(
                f"{at}.{name}: a header value must be printable ASCII (no CR, LF or other "
                f"control character), not {value!r}"
            )


def _with_token(
    target: HttpTargetConfig, at: str, env: Mapping[str, str], folder: Path
) -> HttpTargetConfig:
    """The target with its token read (`token_env`, `token_file`); a host target
    (`settle = "target"`) without one is refused: the host would not take it."""
    given = [k for k in ("token", "token_env", "token_file") if getattr(target, k) is not None]
    if len(given) > 1:
        raise ConfigurationError(f"{at}: give one of token, token_env and token_file")
    if any(name.lower() == "authorization" for name in target.headers) and given:
        raise ConfigurationError(f"{at}.headers: an Authorization header and a token: give one")
    token = target.token
    if target.token_env is not None:
        token = env.get(target.token_env)
        if not token:
            raise ConfigurationError(f"{at}.token_env: ${target.token_env} is not set")
    elif target.token_file is not None:
        path = folder / target.token_file
        try:
            token = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise ConfigurationError(f"{at}.token_file: cannot read {path}: {why}") from None
    if given and (not token or any(c.isspace() or not c.isprintable() for c in token)):
        raise ConfigurationError(f"{at}.{given[0]}: an empty or unprintable token")
    if token is None and target.settle == "target":
        raise ConfigurationError(
            f'{at}: a settle = "target" HTTP target is a band-trio host, which refuses '
            "forwards without its token: give token_env or token_file (the host's "
            "--token-file or BAND_HOST_TOKEN)"
        )
    return msgspec.structs.replace(target, token=token, token_env=None, token_file=None)


def _health(value: str, allow_remote: bool, source: str) -> tuple[str, int] | None:
    if not value:
        return None
    at = f"{source}: $.bridge.health"
    host, port = parse_listen(value, at)
    check_bind(
        host,
        what=f"{at}: the health endpoint",
        allow_remote=allow_remote,
        opt_in="allow_remote = true in [bridge]",
    )
    return host, port
