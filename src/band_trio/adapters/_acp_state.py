"""The room → ACP session map, kept in a small JSON file so that a restarted agent can
resume each room's session (`session/load`).

The file (`BAND_ACP_STATE`), written whole to a temporary file beside it and
renamed over it, so a crash leaves the old map or the new one, never half:

    {"version": 1,
     "agent": {"command": ["opencode", "acp"], "cwd": "/srv/project"},
     "rooms": {"<room id>": "<session id>", ...}}

Sessions belong to one agent in one folder: a file written for another command
or working directory is not read (and is replaced at the next write). A file
that cannot be read is logged and treated as empty; one that cannot be written
is logged, and the map goes on in memory. At most `MAX_ROOMS` rooms are kept,
the oldest forgotten first.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import trio

from ._acp_config import AcpConfig

__all__ = ["SessionMap"]

log = logging.getLogger("band_trio.adapters.acp")

VERSION = 1
MAX_ROOMS = 10_000
MAX_FILE = 4 * 1024 * 1024


class SessionMap:
    """Which session each room has; read from the state file once, written on change."""

    def __init__(self, config: AcpConfig) -> None:
        self.path = config.state_file
        self._agent = {"command": list(config.command), "cwd": config.working_directory}
        self._rooms: dict[str, str] = {}
        self._loaded = self.path is None

    async def get(self, room_id: str) -> str | None:
        await self._load()
        return self._rooms.get(room_id)

    async def put(self, room_id: str, session_id: str) -> None:
        await self._load()
        self._rooms.pop(room_id, None)
        self._rooms[room_id] = session_id  # the newest last: the oldest go first
        while len(self._rooms) > MAX_ROOMS:
            del self._rooms[next(iter(self._rooms))]
        await self._save()

    async def _load(self) -> None:
        if self._loaded or self.path is None:
            return
        self._loaded = True
        file = trio.Path(self.path)
        try:
            if (await file.stat()).st_size > MAX_FILE:
                raise ValueError(f"larger than {MAX_FILE} bytes")
            data: Any = json.loads(await file.read_text("utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning(
                "the ACP state file %s cannot be read (%s): starting afresh", self.path, exc
            )
            return
        if not isinstance(data, dict) or data.get("version") != VERSION:
            log.warning("the ACP state file %s is not one band-trio wrote: ignored", self.path)
            return
        if data.get("agent") != self._agent:
            log.info(
                "the ACP state file %s is another agent's: its sessions are not used", self.path
            )
            return
        rooms = data.get("rooms")
        if isinstance(rooms, dict):
            self._rooms = {
                room: session
                for room, session in rooms.items()
                if isinstance(room, str) and isinstance(session, str)
            }

    async def _save(self) -> None:
        if self.path is None:
            return
        text = json.dumps({"version": VERSION, "agent": self._agent, "rooms": self._rooms})
        temporary = f"{self.path}.{os.getpid()}.tmp"
        try:
            await trio.Path(temporary).write_text(text, "utf-8")
            await trio.Path(temporary).replace(self.path)
        except OSError as exc:
            log.warning("the ACP state file %s cannot be written: %s", self.path, exc)
