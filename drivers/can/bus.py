"""Opening a python-can bus for the CAN backends, and the counters every CAN backend keeps.

The transport is whatever python-can interface the config names. On a lab
machine that is ``socketcan`` (``can0``), ``pcan``, ``kvaser`` ...; in the HIL
suite it is python-can-remote's ``remote`` interface talking to a websocket
server on 127.0.0.1 that bridges every client onto one python-can ``virtual``
channel inside the server process (``rtctl-hil can-bus``, :mod:`rtctl.hil.cli`).
"""
from __future__ import annotations

import contextlib
import weakref
from dataclasses import dataclass

import can
import numpy as np

from rtctl.options import setting

from ..base import ActuatorDriver

# Counters kept in ``DriverHealth.extra`` by both CAN backends.
CAN_COUNTERS = ("bus_errors", "unknown_ids", "late_replies", "dropped_sends")


def open_bus(interface: str, channel, **options) -> can.BusABC:
    """``can.Bus(interface=..., channel=...)`` with a message naming what failed."""
    if channel is None:
        raise ValueError("CAN channel is not set (e.g. 'can0', or 'ws://127.0.0.1:PORT/' for the remote interface)")
    try:
        return can.Bus(interface=interface, channel=channel, **options)
    except Exception as exc:  # python-can raises many types depending on the interface
        raise ConnectionError(f"cannot open CAN bus interface={interface!r} channel={channel!r}: {exc}") from exc


def shutdown_bus(bus: can.BusABC) -> None:
    """``bus.shutdown()``, never raising: a transport already gone (a bus server that died) still leaves the
    bus marked shut down, its socket closed."""
    try:
        bus.shutdown()
    except Exception:  # noqa: BLE001  (python-can-remote: the websocket close fails on a dead server)
        can.BusABC.shutdown(bus)
    sock = getattr(bus, "remote_protocol", None) and getattr(bus, "socket", None)
    if sock is not None:                    # python-can-remote leaves its socket open when the server went away
        with contextlib.suppress(OSError):
            sock.close()


def release_with(owner, release, *args) -> weakref.finalize:
    """Call ``release(*args)`` exactly once: when the returned finalizer is called (the driver's ``close()``),
    when ``owner`` is garbage-collected, or at interpreter exit -- whichever comes first. A driver nobody
    closed (``rtctl run`` leaves the drivers to the end of the process) shuts its bus down all the same
    instead of python-can warning "... was not properly shut down". ``release`` and ``args`` must not
    refer to ``owner``."""
    return weakref.finalize(owner, release, *args)


def drain(bus: can.BusABC, limit: int = 10_000) -> int:
    """Throw away frames already queued (bounded); return how many."""
    n = 0
    while n < limit:
        if bus.recv(0.0) is None:
            break
        n += 1
    return n


@dataclass(frozen=True)
class CanOptions(ActuatorDriver.Options):
    """``[driver]`` keys of the CAN backends: python-can interface and channel, one ID per joint."""

    can_interface: str = setting("str", "socketcan")
    can_channel: str = setting("str", None)     # e.g. can0; required unless the driver is handed a bus
    can_ids: object = setting("ints", None, low=1, high=0x7FF, required=True)
    read_timeout: float = setting("float", 1e-3, positive=True, high=1.0)   # s: reply wait per cycle
    max_failed_cycles: int = setting("int", 5, low=1)                # consecutive missed cycles -> fault


def check_can_ids(name: str, ids, n: int, high: int, what: str) -> list[int]:
    """``ids`` (one or a list, checked by the schema) as ``n`` distinct IDs in 1..``high`` (one per joint);
    ValueError naming ``can_ids`` otherwise."""
    ids = [int(i) for i in np.atleast_1d(ids if ids is not None else [])]
    if len(ids) != n or len(set(ids)) != n or not all(1 <= i <= high for i in ids):
        raise ValueError(f"{name}: can_ids must be {n} distinct {what} 1..{high} (one per joint), got {ids}")
    return ids


def check_channel(name: str, channel, bus) -> None:
    """A driver opening its own bus needs ``can_channel``; one handed a bus does not."""
    if bus is None and not channel:
        raise ValueError(f"{name}: can_channel is required (the CAN channel, e.g. can0, or a bus server's URL)")
