"""The config file: TOML or JSON, every mistake one clear line naming the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from band_trio.bridge import CommandTargetConfig, HttpTargetConfig, load_config, parse_config
from band_trio.errors import ConfigurationError

GOOD = """
[bridge]
health = "127.0.0.1:0"
rest_url = "http://127.0.0.1:4000"
ws_url = "ws://127.0.0.1:4000/socket/websocket"

[[identity]]
agent_id = "support"
api_key_env = "SUPPORT_KEY"
target = { type = "http", url = "http://127.0.0.1:9000/band", headers = { X-Token = "t" } }

[[identity]]
name = "ops"
agent_id = "ops-agent"
api_key = "k2"
target = { type = "command", argv = ["./handle"] }
"""


def test_a_toml_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "bridge.toml"
    path.write_text(GOOD)
    config = load_config(path, env={"SUPPORT_KEY": "k1"})
    first, second = config.identities
    assert config.health == ("127.0.0.1", 0)
    assert first.api_key == "k1" and first.rest_url == "http://127.0.0.1:4000"
    assert first.target == HttpTargetConfig(
        url="http://127.0.0.1:9000/band", headers={"X-Token": "t"}
    )
    assert second.name == "ops" and second.target == CommandTargetConfig(argv=["./handle"])
    assert "k1" not in repr(first)  # the key is never printed


def test_a_json_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "bridge.json"
    path.write_text(
        json.dumps(
            {
                "identity": [
                    {
                        "agent_id": "a",
                        "api_key": "k",
                        "rest_url": "http://h:1",
                        "ws_url": "ws://h:1/socket/websocket",
                        "target": {"type": "a2a", "url": "http://h:2/"},
                    }
                ]
            }
        )
    )
    assert load_config(path, env={}).identities[0].target.__class__.__name__ == "A2ATargetConfig"


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({}, "object missing required field `identity`"),
        ({"identity": []}, "no [[identity]]"),
        ({"identity": [{"agent_id": "a", "target": {"type": "ftp"}}]}, "$.identity[0].target"),
        (
            {"identity": [{"agent_id": "a", "api_key": "k", "target": {"type": "http", "url": 3}}]},
            "$.identity[0].target.url",
        ),
        (
            {"identity": [{"agent_id": "a", "target": {"type": "http", "url": "http://x"}}]},
            "exactly one of api_key and api_key_env",
        ),
        (
            {
                "identity": [
                    {
                        "agent_id": "a",
                        "api_key_env": "NOPE",
                        "target": {"type": "http", "url": "http://x"},
                    }
                ]
            },
            "$NOPE is not set",
        ),
        (
            {
                "identity": [
                    {
                        "agent_id": "a",
                        "api_key": "k",
                        "rest_url": "http://h",
                        "target": {"type": "http", "url": "http://x"},
                    }
                ]
            },
            "ws_url: a ws(s) URL is required",
        ),
        (
            {
                "identity": [
                    {
                        "agent_id": "a",
                        "api_key": "k",
                        "rest_url": "http://h",
                        "ws_url": "ws://h/socket/websocket",
                        "target": {"type": "command", "argv": []},
                    }
                ]
            },
            "argv: a command",
        ),
        ({"bridge": {"health": "nope"}, "identity": [{"agent_id": "a"}]}, "$.identity[0]"),
        ({"bridge": {"colour": 1}, "identity": []}, "unknown field `colour`"),
    ],
)
def test_every_mistake_is_one_line_naming_the_key(data: object, says: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_config(data, source="bridge.toml", env={})
    text = str(caught.value)
    assert says in text and text.startswith("bridge.toml: ") and "\n" not in text


def test_an_unreadable_or_broken_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read"):
        load_config(tmp_path / "missing.toml")
    broken = tmp_path / "b.toml"
    broken.write_text("[[identity]\n")
    with pytest.raises(ConfigurationError, match="not valid TOML"):
        load_config(broken)
    for name, text in [("deep.json", "[" * 100_000), ("deep.toml", "a = " + "[" * 100_000)]:
        deep = tmp_path / name
        deep.write_text(text)
        with pytest.raises(ConfigurationError, match="nested too deeply"):
            load_config(deep)


def test_an_identity_bridged_twice_is_refused() -> None:
    one = {
        "agent_id": "a",
        "api_key": "k",
        "rest_url": "http://h",
        "ws_url": "ws://h/socket/websocket",
        "target": {"type": "http", "url": "http://x"},
    }
    with pytest.raises(ConfigurationError, match="bridged twice"):
        parse_config({"identity": [one, one]}, env={})


def _one(**bridge: object) -> dict[str, object]:
    return {
        "bridge": bridge,
        "identity": [
            {
                "agent_id": "a",
                "api_key": "k",
                "rest_url": "http://h",
                "ws_url": "ws://h/socket/websocket",
                "target": {"type": "http", "url": "http://x"},
            }
        ],
    }


def test_policy_values_come_from_the_file_and_are_checked() -> None:
    config = parse_config(_one(policy={"max_forwards": 4, "shutdown_grace": 2.5}), env={})
    assert config.policy.max_forwards == 4 and config.policy.shutdown_grace == 2.5
    assert config.policy.forward_connect == 5.0  # the default for the rest
    with pytest.raises(ConfigurationError, match=r"\$\.bridge\.policy\.max_forwards: must be"):
        parse_config(_one(policy={"max_forwards": 0}), env={})
    with pytest.raises(ConfigurationError, match="unknown field `speed`"):
        parse_config(_one(policy={"speed": 1}), env={})


def test_the_how_to_s_example_config_is_valid(tmp_path: Path) -> None:
    doc = Path(__file__).parents[2] / "docs" / "how-to" / "bridge.md"
    example = doc.read_text().split("```toml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "bridge.toml"
    path.write_text(example)
    env = {
        "SUPPORT_KEY": "k1",
        "RESEARCH_KEY": "k2",
        "OPS_KEY": "k3",
        "SUPPORT_HOST_TOKEN": "a-host-token-of-20-chars",
    }
    config = load_config(path, env=env)
    assert [i.target.__class__.__name__ for i in config.identities] == [
        "HttpTargetConfig",
        "A2ATargetConfig",
        "CommandTargetConfig",
    ]
    assert config.health == ("127.0.0.1", 8765) and config.policy.max_forwards == 32


def test_each_target_says_who_settles_its_messages() -> None:
    def with_target(target: dict[str, object]) -> dict[str, object]:
        data = _one()
        identities = data["identity"]
        assert isinstance(identities, list)
        identities[0]["target"] = target
        return data

    plain = parse_config(_one(), env={}).identities[0].target
    assert plain.settle == "bridge"  # the default: the bridge claims and settles
    for target in (
        {"type": "http", "url": "http://x", "settle": "target", "token": "t" * 20},
        {"type": "a2a", "url": "http://x", "settle": "target"},
        {"type": "command", "argv": ["./x"], "settle": "target"},
    ):
        assert parse_config(with_target(target), env={}).identities[0].target.settle == "target"
    with pytest.raises(ConfigurationError, match=r"\$\.identity\[0\]\.target\.settle"):
        parse_config(with_target({"type": "http", "url": "http://x", "settle": "me"}), env={})


def test_the_retry_policy_comes_from_the_file_and_is_checked() -> None:
    policy = {"retry_first": 0.5, "retry_max": 4, "forward_attempts": 2}
    config = parse_config(_one(policy=policy), env={})
    assert (config.policy.retry_first, config.policy.retry_max) == (0.5, 4)
    assert config.policy.forward_attempts == 2
    for bad, says in [
        ({"retry_first": 0}, "retry_first: must be seconds over 0 and at most 3600, not 0"),
        ({"retry_first": 2, "retry_max": 1}, "retry_max must be at least retry_first"),
        ({"forward_attempts": 0}, "forward_attempts: must be a whole number from 1 to 1,000"),
    ]:
        with pytest.raises(ConfigurationError, match=says):
            parse_config(_one(policy=bad), env={})


def test_the_how_to_s_host_walkthrough_config_is_valid(tmp_path: Path) -> None:
    doc = Path(__file__).parents[2] / "docs" / "how-to" / "bridge.md"
    walkthrough = doc.read_text().split("# 3. the bridge", 1)[1].split("DEMO_AGENT_KEY=", 1)[0]
    lines = [line[len("#      ") :] for line in walkthrough.splitlines()[1:]]
    path = tmp_path / "bridge.toml"
    path.write_text("\n".join(lines).replace("AGENT-ID", "agent"))
    (tmp_path / "host.token").write_text("a-host-token-of-20-chars\n")
    config = load_config(path, env={"DEMO_AGENT_KEY": "k"})
    (demo,) = config.identities
    assert demo.target == HttpTargetConfig(
        url="http://127.0.0.1:8800/", settle="target", token="a-host-token-of-20-chars"
    )


def _host_target(**target: object) -> dict[str, object]:
    data = _one()
    identities = data["identity"]
    assert isinstance(identities, list)
    identities[0]["target"] = {"type": "http", "url": "http://127.0.0.1:8800/", **target}
    return data


TOKEN = "a-host-token-of-20-chars"


def test_a_host_target_must_carry_the_hosts_token(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r'settle = "target" HTTP target is a band-trio'):
        parse_config(_host_target(settle="target"), env={})
    from_env = parse_config(
        _host_target(settle="target", token_env="HOST_TOKEN"), env={"HOST_TOKEN": TOKEN}
    ).identities[0]
    (tmp_path / "host.token").write_text(f"  {TOKEN}\n")
    from_file = parse_config(
        _host_target(settle="target", token_file="host.token"), env={}, folder=tmp_path
    ).identities[0]
    inline = parse_config(_host_target(token=TOKEN), env={}).identities[0]
    for identity in (from_env, from_file, inline):
        assert isinstance(identity.target, HttpTargetConfig)
        assert identity.target.token == TOKEN
        assert TOKEN not in repr(identity) and TOKEN not in repr(identity.target)


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ({"token_env": "NOPE"}, r"token_env: \$NOPE is not set"),
        ({"token_file": "missing.token"}, "token_file: cannot read"),
        ({"token": TOKEN, "token_env": "X"}, "give one of token, token_env and token_file"),
        ({"token": ""}, "an empty or unprintable token"),
        ({"token": "has a space"}, "an empty or unprintable token"),
        ({"token": TOKEN, "headers": {"Authorization": "Bearer x"}}, "an Authorization header"),
    ],
)
def test_a_bad_token_is_one_line_naming_the_key(
    tmp_path: Path, target: dict[str, object], says: str
) -> None:
    with pytest.raises(ConfigurationError, match=r"\$\.identity\[0\]\.") as refused:
        parse_config(_host_target(**target), env={}, folder=tmp_path)
    assert refused.match(says)


def test_the_health_endpoint_is_loopback_unless_the_file_says_otherwise() -> None:
    for host in ("0.0.0.0", "192.0.2.7", "::"):
        data = _one()
        data["bridge"] = {"health": f"{host}:8765" if ":" not in host else f"[{host}]:8765"}
        with pytest.raises(ConfigurationError, match="allow_remote = true"):
            parse_config(data, env={})
        data["bridge"] = {**data["bridge"], "allow_remote": True}  # type: ignore[dict-item]
        assert parse_config(data, env={}).health == (host, 8765)
    data = _one()
    data["bridge"] = {"health": "localhost:0"}
    assert parse_config(data, env={}).health == ("localhost", 0)


def test_every_number_of_bridge_policy_can_be_set_from_the_file() -> None:
    """The file's `[bridge.policy]` and `BridgePolicy` stay in step: each number of the
    policy is a key of the file, except the host's own, which are refused by name."""
    from dataclasses import fields

    from band_trio.bridge import BridgePolicy
    from band_trio.bridge._config import HOST_ONLY, _Policy

    numbers = {f.name for f in fields(BridgePolicy) if f.name != "server"}
    assert set(_Policy.__struct_fields__) == numbers
    given = {"target_connections": 3, "health_grace": 0.5, "forward_deadline": 60}
    policy = parse_config(_one(policy=given), env={}).policy
    assert (policy.target_connections, policy.health_grace) == (3, 0.5)
    assert policy.forward_deadline == 60
    for name in HOST_ONLY:
        with pytest.raises(ConfigurationError, match=rf"policy\.{name}: a setting of the host"):
            parse_config(_one(policy={name: 5}), env={})
    with pytest.raises(ConfigurationError, match="target_connections: must be a whole number"):
        parse_config(_one(policy={"target_connections": 0}), env={})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("shutdown_grace", float("inf")),
        ("forward_deadline", float("inf")),
        ("health_grace", float("nan")),
        ("retry_max", 1e23),
        ("room_queue", 2**63 - 1),
        ("target_max_body", 2**63 - 1),
        ("forwarded_memory", 2**63 - 1),
    ],
)
def test_a_number_that_would_turn_a_bound_off_is_refused(name: str, value: float) -> None:
    """`shutdown_grace = inf` or a 2**63 - 1 queue turned the deadline or the cap off
    (issue 38, item 7g): each number has a finite range, named in the error."""
    with pytest.raises(ConfigurationError, match=rf"policy\.{name}: must be .*, not "):
        parse_config(_one(policy={name: value}), env={})


def test_every_number_has_a_range_whose_ends_are_taken() -> None:
    from band_trio.bridge._config import HOST_ONLY, POLICY_RANGES, _Policy

    assert set(POLICY_RANGES) == set(_Policy.__struct_fields__)
    for name, allowed in POLICY_RANGES.items():
        if name in HOST_ONLY:
            continue
        top = int(allowed.high) if allowed.whole else allowed.high
        within = {"retry_first": {"retry_max": top}}.get(name, {})  # retry_max >= retry_first
        parse_config(_one(policy={name: top, **within}), env={})
        past = top + 1 if allowed.whole else top * 1.01
        with pytest.raises(ConfigurationError, match=rf"policy\.{name}: must be"):
            parse_config(_one(policy={name: past}), env={})


def _headers(headers: dict[str, str]) -> dict[str, object]:
    data = _one()
    identities = data["identity"]
    assert isinstance(identities, list)
    identities[0]["target"] = {"type": "http", "url": "http://x", "headers": headers}
    return data


@pytest.mark.parametrize(
    ("headers", "says"),
    [
        ({"bad name": "x"}, r"target\.headers: 'bad name' is not an HTTP header name"),
        ({"": "x"}, "is not an HTTP header name"),
        ({"X-Ü": "x"}, "is not an HTTP header name"),
        ({"X:Y": "x"}, "is not an HTTP header name"),
        ({"X-A": "a\r\nX-Injected: 1"}, r"target\.headers\.X-A: a header value must be"),
        ({"X-A": "a\nb"}, "no CR, LF or other control character"),
        ({"X-A": "a\x00b"}, "a header value must be"),
        ({"X-A": "café"}, "printable ASCII"),
        ({"Content-Length": "3"}, "the bridge sets this header itself"),
        ({"content-type": "text/plain"}, "the bridge sets this header itself"),
    ],
)
def test_a_header_no_forward_could_send_is_refused_at_load(
    headers: dict[str, str], says: str
) -> None:
    with pytest.raises(ConfigurationError, match=says):
        parse_config(_headers(headers), env={})


def test_legal_headers_are_kept() -> None:
    headers = {"X-Api-Key": "a b\tc", "x.custom~1": "!~"}
    target = parse_config(_headers(headers), env={}).identities[0].target
    assert isinstance(target, HttpTargetConfig) and target.headers == headers


def test_two_identities_with_one_name_are_refused_naming_the_name() -> None:
    data = _one()
    identities = data["identity"]
    assert isinstance(identities, list)
    first = {**identities[0], "name": "support"}
    second = {**identities[0], "agent_id": "b", "name": "support"}
    with pytest.raises(ConfigurationError, match=r"\$\.identity\[1\]\.name: 'support' is the"):
        parse_config({"identity": [first, second]}, env={})
    unnamed = {**identities[0], "agent_id": "support"}  # its name defaults to its agent id
    with pytest.raises(ConfigurationError, match="'support' is the name of another identity"):
        parse_config({"identity": [first, unnamed]}, env={})
