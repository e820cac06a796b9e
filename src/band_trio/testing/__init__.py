"""Tools for testing agents and adapters against band-trio, and the conformance kit.

The kit (`Subject`, `run_probes`, `PROBES`, `open_kit`) drives one adapter
through a scripted room on the embedded platform and reports, probe by probe,
whether it stops when the room's users say so (docs/reference/conformance.md).

`RecordingAdapter` records every turn with timestamps and lets a test wait for
what it expects; `open_recording_target` serves a `RecordingTarget`, an HTTP
target that records what a bridge forwards to it; `TaskTracker` proves that
work leaves no task behind; `run_chaos` drives an agent through a seeded storm
of platform faults and signals and reports which promises (if any) broke.
"""

from __future__ import annotations

from ._chaos import CHAOS_POLICY as CHAOS_POLICY
from ._chaos import ChaosReport as ChaosReport
from ._chaos import run_chaos as run_chaos
from ._kit import KIT_POLICY as KIT_POLICY
from ._kit import Kit as Kit
from ._kit import ProbeResult as ProbeResult
from ._kit import Subject as Subject
from ._kit import open_kit as open_kit
from ._observed import Observed as Observed
from ._observed import TurnRecord as TurnRecord
from ._probes import PROBES as PROBES
from ._probes import Probe as Probe
from ._probes import history_after_tool_abort as history_after_tool_abort
from ._probes import interrupt_mid_work as interrupt_mid_work
from ._probes import leave_waits as leave_waits
from ._probes import next_turn_waits as next_turn_waits
from ._probes import nothing_after_finish as nothing_after_finish
from ._probes import nothing_left as nothing_left
from ._probes import probe_name as probe_name
from ._probes import reason_reaches_next_turn as reason_reaches_next_turn
from ._probes import remote_stop_once as remote_stop_once
from ._probes import run_probes as run_probes
from ._probes import select_probes as select_probes
from ._probes import stop_before_handle as stop_before_handle
from ._probes import stop_then_play as stop_then_play
from ._probes import swallowed_cancel as swallowed_cancel
from ._probes_people import ask_interrupted as ask_interrupted
from ._probes_people import ask_stopped as ask_stopped
from ._probes_people import guidance_not_lost as guidance_not_lost
from ._recorder import Behaviour as Behaviour
from ._recorder import RecordingAdapter as RecordingAdapter
from ._report import table as table
from ._target import Received as Received
from ._target import RecordingTarget as RecordingTarget
from ._target import open_recording_target as open_recording_target
from ._tasks import TaskTracker as TaskTracker
from ._tasks import client_sockets as client_sockets
from ._transcript import transcript_problems as transcript_problems

__all__ = [
    "CHAOS_POLICY",
    "KIT_POLICY",
    "PROBES",
    "Behaviour",
    "ChaosReport",
    "Kit",
    "Observed",
    "Probe",
    "ProbeResult",
    "Received",
    "RecordingAdapter",
    "RecordingTarget",
    "Subject",
    "TaskTracker",
    "TurnRecord",
    "ask_interrupted",
    "ask_stopped",
    "client_sockets",
    "guidance_not_lost",
    "history_after_tool_abort",
    "interrupt_mid_work",
    "leave_waits",
    "next_turn_waits",
    "nothing_after_finish",
    "nothing_left",
    "open_kit",
    "open_recording_target",
    "probe_name",
    "reason_reaches_next_turn",
    "remote_stop_once",
    "run_chaos",
    "run_probes",
    "select_probes",
    "stop_before_handle",
    "stop_then_play",
    "swallowed_cancel",
    "table",
    "transcript_problems",
]
