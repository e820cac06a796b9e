"""`GET /v1/capabilities`: what this server supports, in Hermes' shape.

Hermes' object (`_handle_capabilities` in `gateway/platforms/api_server.py`,
#17458; the runs endpoints as its `api_server_runs.py` @ 4a0f27a routes them):
`object: "hermes.api_server.capabilities"`, `auth`, `runtime`, a `features`
map of booleans a client gates its UI on, and `endpoints` (name → method and
path template) it should read paths from instead of hard-coding them. A
client written for Hermes finds its runs features here under Hermes' names;
what band-trio does not serve (chat completions, responses, sessions) is
`false`, so a client that gates on the flag does not try it.

band-trio adds what a runs client needs that Hermes does not say: the
listing, re-attach (`Last-Event-ID`, how long events are kept), stop with
remote stop, the event types, the idempotency window (Hermes' own
`{"supported", "durable", "retention_seconds"}`), and the limits. Built once
per server from its `RunsPolicy`: nothing in it changes while it serves.
"""

from __future__ import annotations

from typing import Any

from ._listing import STATUSES
from ._policy import RunsPolicy

__all__ = ["EVENT_TYPES", "capabilities"]

EVENT_TYPES = (
    "message.delta",
    "tool.started",
    "tool.completed",
    "reasoning.available",
    "status.update",
    "approval.request",
    "approval.responded",
    "run.steered",
    "run.completed",
    "run.failed",
    "run.cancelled",
    "run.interrupted",
)
"""What a run's event stream can carry (`data: {"event": <type>, "run_id", ...}`)."""

_RUN = "/v1/runs/{run_id}"


def _endpoint(method: str, path: str) -> dict[str, str]:
    return {"method": method, "path": path}


def capabilities(policy: RunsPolicy, model: str) -> dict[str, Any]:
    """The body of `GET /v1/capabilities` for a server with this policy."""
    return {
        "object": "hermes.api_server.capabilities",
        "platform": "band-trio",
        "model": model,
        "auth": {"type": "bearer", "required": True},
        "runtime": {
            "mode": "server_agent",
            "tool_execution": "server",
            "split_runtime": False,
            "description": (
                "Each run is a turn of the server's band-trio adapter; its tools and "
                "remote work run on the server's side."
            ),
        },
        "features": {
            "chat_completions": False,
            "chat_completions_streaming": False,
            "responses_api": False,
            "responses_streaming": False,
            "run_submission": True,
            "run_status": True,
            "run_events_sse": True,
            "run_stop": True,
            "run_steer": True,
            "run_approval_response": True,
            "tool_progress_events": True,
            "approval_events": True,
            "session_resources": False,
            "run_listing": True,
            "run_idempotency": True,
            "run_events_resume": True,
            "run_remote_stop": True,
            "run_interrupted_on_shutdown": True,
        },
        "endpoints": {
            "health": _endpoint("GET", "/health"),
            "capabilities": _endpoint("GET", "/v1/capabilities"),
            "runs": _endpoint("POST", "/v1/runs"),
            "run_list": _endpoint("GET", "/v1/runs"),
            "run_status": _endpoint("GET", _RUN),
            "run_events": _endpoint("GET", f"{_RUN}/events"),
            "run_approval": _endpoint("POST", f"{_RUN}/approval"),
            "run_steer": _endpoint("POST", f"{_RUN}/steer"),
            "run_stop": _endpoint("POST", f"{_RUN}/stop"),
        },
        "events": list(EVENT_TYPES),
        "run_statuses": sorted(STATUSES),
        "idempotency": {
            "supported": True,
            "durable": False,
            "header": "Idempotency-Key",
            "retention_seconds": policy.idempotency_retention,
            "max_keys": policy.max_idempotency_keys,
        },
        "events_stream": {
            "resume_header": "Last-Event-ID",
            "retention_seconds": policy.retention,
            "max_events_per_run": policy.max_events_per_run,
            "keepalive_seconds": policy.keepalive,
        },
        "stop": {
            "remote_stop": True,
            "wait_query": "wait=true",
            "stop_wait_seconds": policy.stop_wait,
        },
        "listing": {
            "paging": "after",
            "default_limit": 20,
            "max_limit": policy.max_list_page,
            "filters": ["status"],
        },
        "limits": {
            "max_concurrent_runs": policy.max_concurrent_runs,
            "max_body_bytes": policy.max_body,
            "max_retained_runs": policy.max_retained_runs,
        },
    }
