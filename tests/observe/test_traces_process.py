"""`--traces` on a real `band-trio agent`: spans to a local OTLP/HTTP receiver (what a
collector gets), or as JSON on stderr; and without the `otel` extra the agent runs
as before, while asking for traces is one line and exit 2."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from observed_process import command, stop

from band_trio.platform import Platform
from support import agent_env, seeded, status

DEADLINE = 30
WITHOUT_OTEL = (
    "import sys; sys.modules['opentelemetry'] = None; "  # as if the extra were not installed
    "from band_trio.cli import main; sys.exit(main(sys.argv[1:]))"
)


def _sink_module() -> Any:
    """benchmarks/otlp_sink.py, the benchmark's collector stand-in, tested here too."""
    path = Path(__file__).parents[2] / "benchmarks" / "otlp_sink.py"
    spec = importlib.util.spec_from_file_location("otlp_sink", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Receiver:
    """An OTLP/HTTP trace receiver on loopback: what it was sent, decoded."""

    def __init__(self) -> None:
        self.url = ""
        self.app = _sink_module().Sink(keep=True)

    def spans(self) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
        """(name, attributes, resource attributes) of every span received."""
        found = []
        for request in self.app.kept:
            for resource_spans in request.resource_spans:
                resource = _attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        found.append((span.name, _attributes(span.attributes), resource))
        return found


def _attributes(values: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in values:
        kind = item.value.WhichOneof("value")
        out[item.key] = getattr(item.value, kind) if kind else None
    return out


@asynccontextmanager
async def receiver() -> AsyncIterator[Receiver]:
    found = Receiver()
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = config.errorlog = None
    done = trio.Event()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(partial(serve, found.app, config, shutdown_trigger=done.wait))
        found.url = binds[0]
        try:
            yield found
        finally:
            done.set()


async def test_otlp_spans_reach_a_collector_with_the_service_name(platform: Platform) -> None:
    _, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with receiver() as collector:
            env = {**agent_env(platform), "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url}
            async with command("agent", "--traces", "otlp", env=env, metrics=False) as agent:
                await platform.wait_until(lambda: bool(platform.connected_agents()))
                message = platform.post_message(room, user, "traced")
                await platform.wait_until(lambda: status(platform, message) == "processed")
                await stop(agent.proc)  # the spans still queued leave at exit
                assert agent.proc.returncode == 0
    turns = [(a, r) for name, a, r in collector.spans() if name == "band_trio.turn"]
    assert len(turns) == 1
    attributes, resource = turns[0]
    assert attributes["band.turn.id"] == message
    assert attributes["band.turn.outcome"] == "succeeded"
    assert resource["service.name"] == "band-trio-agent"
    names = {name for name, _, _ in collector.spans()}
    assert {"band_trio.claim", "band_trio.adapter", "GET me"} <= names


async def test_console_spans_are_json_on_stderr(platform: Platform) -> None:
    _, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with command("agent", "--traces", "console", env=agent_env(platform),
                           metrics=False) as agent:  # fmt: skip
            await platform.wait_until(lambda: bool(platform.connected_agents()))
            message = platform.post_message(room, user, "traced")
            await platform.wait_until(lambda: status(platform, message) == "processed")
            await stop(agent.proc)
    err = "\n".join(agent.stderr.lines)
    assert '"name": "band_trio.turn"' in err and f'"band.turn.id": "{message}"' in err
    assert not [line for line in agent.stdout.lines if line]  # stdout stays the command's


async def test_without_the_extra_the_agent_runs_and_traces_are_refused(
    platform: Platform,
) -> None:
    _, room, user = seeded(platform)
    env = agent_env(platform)
    refused = await trio.run_process(
        [sys.executable, "-c", WITHOUT_OTEL, "agent", "--traces", "console"],
        env={**os.environ, **env},
        capture_stderr=True,
        check=False,
    )
    assert refused.returncode == 2
    needs = b"band-trio: tracing needs OpenTelemetry: pip install 'band-trio[otel]'\n"
    assert refused.stderr == needs
    with trio.fail_after(DEADLINE):
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-c", WITHOUT_OTEL, "agent", "--metrics", "127.0.0.1:0"],
            env={**os.environ, **env},
            stderr=subprocess.DEVNULL,
        )
        try:
            await platform.wait_until(lambda: bool(platform.connected_agents()))
            message = platform.post_message(room, user, "untraced")
            await platform.wait_until(lambda: status(platform, message) == "processed")
        finally:
            await stop(proc)
    assert proc.returncode == 0
