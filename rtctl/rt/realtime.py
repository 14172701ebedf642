"""Operating-system real-time settings for the loop thread, applied when permitted.

SCHED_FIFO priority, CPU affinity and mlockall need privileges (root or
CAP_SYS_NICE / CAP_IPC_LOCK, or rtprio/memlock limits). Whatever cannot be
applied is reported once, and the loop runs anyway.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from dataclasses import dataclass, field

MCL_CURRENT, MCL_FUTURE = 1, 2


@dataclass
class RealtimeSettings:
    priority: int | None = None          # SCHED_FIFO priority 1..99; None leaves the scheduler alone
    cpus: list[int] | None = None        # CPU affinity; None leaves it alone
    lock_memory: bool = False            # mlockall(MCL_CURRENT | MCL_FUTURE)
    disable_gc: bool = True              # gc.freeze() + gc.disable() while the loop runs


@dataclass
class RealtimeReport:
    applied: list[str] = field(default_factory=list)
    not_applied: list[str] = field(default_factory=list)

    def message(self) -> str:
        parts = []
        if self.applied:
            parts.append("applied: " + ", ".join(self.applied))
        if self.not_applied:
            parts.append("NOT applied: " + "; ".join(self.not_applied))
        return "real-time settings " + (" | ".join(parts) if parts else "none requested")


def apply_realtime(settings: RealtimeSettings) -> RealtimeReport:
    """Apply what is permitted to the calling process; never raises for lack of permission."""
    report = RealtimeReport()
    if settings.priority is not None:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(int(settings.priority)))
            report.applied.append(f"SCHED_FIFO priority {settings.priority}")
        except (PermissionError, OSError, AttributeError) as exc:
            report.not_applied.append(f"SCHED_FIFO priority {settings.priority} ({exc})")
    if settings.cpus is not None:
        try:
            os.sched_setaffinity(0, set(settings.cpus))
            report.applied.append(f"CPU affinity {sorted(settings.cpus)}")
        except (PermissionError, OSError, AttributeError) as exc:
            report.not_applied.append(f"CPU affinity {settings.cpus} ({exc})")
    if settings.lock_memory:
        libc_name = ctypes.util.find_library("c")
        try:
            libc = ctypes.CDLL(libc_name, use_errno=True)
            if libc.mlockall(MCL_CURRENT | MCL_FUTURE) != 0:
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
            report.applied.append("mlockall")
        except (OSError, AttributeError, TypeError) as exc:
            report.not_applied.append(f"mlockall ({exc})")
    return report


def restore_scheduler() -> None:
    """Back to SCHED_OTHER after the loop (best effort)."""
    try:
        if os.sched_getscheduler(0) == os.SCHED_FIFO:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except (PermissionError, OSError, AttributeError):
        pass
