"""Operating-system real-time settings for the loop thread, applied when permitted.

SCHED_FIFO priority, CPU affinity and mlockall need privileges (root or
CAP_SYS_NICE / CAP_IPC_LOCK, or rtprio/memlock limits). Whatever cannot be
applied is reported once, and the loop runs anyway.

Without SCHED_FIFO the loop thread still asks the fair scheduler for a short time
slice (``time_slice``, sched_setattr's sched_runtime; Linux 6.12 and later, no
privilege needed). EEVDF gives a task with a shorter slice an earlier virtual
deadline, so the loop thread, woken at its deadline, preempts a reader or the
telemetry publisher at once instead of waiting for the end of their slice (1.4 ms
by default on 2 cores): that wait was the overruns measured under normal scheduling.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
from dataclasses import dataclass, field

MCL_CURRENT, MCL_FUTURE = 1, 2
SYS_SCHED_SETATTR = {"x86_64": 314, "aarch64": 274, "arm64": 274}   # asm-generic and x86_64 unistd tables
TIME_SLICE = 1e-4                        # the kernel's lower bound for a custom slice (0.1 ms)


class SchedAttr(ctypes.Structure):
    """``struct sched_attr`` (include/uapi/linux/sched/types.h), the fields up to sched_period."""
    _fields_ = [("size", ctypes.c_uint32), ("sched_policy", ctypes.c_uint32), ("sched_flags", ctypes.c_uint64),
                ("sched_nice", ctypes.c_int32), ("sched_priority", ctypes.c_uint32),
                ("sched_runtime", ctypes.c_uint64), ("sched_deadline", ctypes.c_uint64),
                ("sched_period", ctypes.c_uint64)]


@dataclass
class RealtimeSettings:
    priority: int | None = None          # SCHED_FIFO priority 1..99; None leaves the scheduler alone
    cpus: list[int] | None = None        # CPU affinity; None leaves it alone
    lock_memory: bool = False            # mlockall(MCL_CURRENT | MCL_FUTURE)
    disable_gc: bool = True              # gc.freeze() + gc.disable() while the loop runs
    time_slice: float | None = TIME_SLICE  # s, the fair scheduler's slice for the loop thread; None: the kernel's
    time_slice_asked: bool = False         # asked for by name: a kernel that keeps its own slice is reported


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
    if settings.time_slice is not None and not _fifo():
        problem = set_time_slice(settings.time_slice)
        if not problem:
            report.applied.append(f"time slice {settings.time_slice * 1e6:.0f} us")
        elif settings.time_slice_asked:   # the default says nothing every run on a kernel before 6.12
            report.not_applied.append(f"time slice {settings.time_slice * 1e6:.0f} us ({problem})")
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


def _fifo() -> bool:
    try:
        return os.sched_getscheduler(0) == os.SCHED_FIFO
    except (OSError, AttributeError):
        return False


def _sched_attr_call(getting: bool, attr: SchedAttr) -> str:
    number = SYS_SCHED_SETATTR.get(platform.machine())
    if number is None or not hasattr(os, "sched_getscheduler"):
        return f"no sched_setattr on {platform.system()} {platform.machine()}"
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        args = (number + 1, 0, ctypes.byref(attr), ctypes.sizeof(SchedAttr), 0) if getting else \
            (number, 0, ctypes.byref(attr), 0)
        if libc.syscall(*args) != 0:
            return f"sched_{'get' if getting else 'set'}attr: {os.strerror(ctypes.get_errno())}"
    except (OSError, AttributeError) as exc:
        return str(exc)
    return ""


def time_slice() -> float | None:
    """The calling thread's fair-scheduler slice in seconds (None where it cannot be read)."""
    attr = SchedAttr()
    return None if _sched_attr_call(True, attr) else attr.sched_runtime * 1e-9


def set_time_slice(seconds: float) -> str:
    """Give the calling thread a fair-scheduler slice of ``seconds`` (0: the kernel's default), keeping its
    policy and niceness; returns what went wrong, or "" when the kernel took it."""
    try:
        attr = SchedAttr(size=ctypes.sizeof(SchedAttr), sched_policy=os.sched_getscheduler(0),
                         sched_nice=os.getpriority(os.PRIO_PROCESS, 0), sched_runtime=int(round(seconds * 1e9)))
    except (OSError, AttributeError) as exc:
        return str(exc)
    problem = _sched_attr_call(False, attr)
    if problem or not seconds:
        return problem
    if time_slice() != attr.sched_runtime * 1e-9:
        return f"kernel {platform.release()} keeps its own slice (custom slices need Linux 6.12)"
    return ""


def restore_scheduler() -> None:
    """Back to SCHED_OTHER and the kernel's time slice after the loop (best effort)."""
    try:
        if os.sched_getscheduler(0) == os.SCHED_FIFO:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except (PermissionError, OSError, AttributeError):
        pass
    set_time_slice(0.0)
