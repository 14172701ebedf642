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
    can_channel: str = setting("str", None, required=True)          # e.g. can0
    can_ids: object = setting("ints", None, low=1, high=0x7FF, required=True)
    read_timeout: float = setting("float", 1e-3, positive=True, high=1.0)   # s: reply wait per cycle
    max_failed_cycles: int = setting("int", 5, low=1)                # consecutive missed cycles -> fault


def can_arguments(options: dict, context) -> dict:
    """The constructor arguments both CAN backends share, from a validated table."""
    return dict(interface=options["can_interface"], channel=options["can_channel"], joints=options["joints"],
                mode=options["mode"], transmission=context.transmission, reply_timeout=options["read_timeout"],
                max_missed=options["max_failed_cycles"])
