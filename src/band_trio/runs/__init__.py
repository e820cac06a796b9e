"""The runs API: start a run over HTTP, stream its events, stop it for real.

Hermes Agent 0.19's routes and payloads (`POST /v1/runs`, `GET /v1/runs/{id}`,
`GET /v1/runs/{id}/events`, `POST /v1/runs/{id}/stop`), served by hypercorn on
trio, where each run is a cancel scope in the server's nursery and runs its
adapter through the same `Turn` contract as a room's turn:

* `open_runs_api(adapter, api_key=...)` — serve for the length of a block;
  `serve_runs_api(...)` — serve until closed (what `band-trio runs-api` runs);
* `RunsServer` — the address and the `RunsService` that owns the runs;
* `RunsPolicy` — every duration and count (stop wait, retention, limits);
* `RunsService.start(RunRequest(...))` / `.stop(run, reason, wait=...)` — the same
  without HTTP; `TooManyRuns`, `Draining` and `BadRequest` are `BandTrioError`s.

See docs/how-to/runs-api.md.
"""

from __future__ import annotations

from ._policy import RunsPolicy as RunsPolicy
from ._request import BadRequest as BadRequest
from ._request import RunRequest as RunRequest
from ._run import Run as Run
from ._run import RunStatus as RunStatus
from ._serve import MIN_KEY_LENGTH as MIN_KEY_LENGTH
from ._serve import RunsServer as RunsServer
from ._serve import check_api_key as check_api_key
from ._serve import open_runs_api as open_runs_api
from ._serve import serve_runs_api as serve_runs_api
from ._service import Draining as Draining
from ._service import RunsService as RunsService
from ._service import TooManyRuns as TooManyRuns

__all__ = [
    "MIN_KEY_LENGTH",
    "BadRequest",
    "Draining",
    "Run",
    "RunRequest",
    "RunStatus",
    "RunsPolicy",
    "RunsServer",
    "RunsService",
    "TooManyRuns",
    "check_api_key",
    "open_runs_api",
    "serve_runs_api",
]
