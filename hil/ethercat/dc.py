"""Distributed clocks of an emulated ESC (ETG.1000.4, the DL's distributed clocks: local time, receive times,
system time, offset, delay and difference; the cyclic unit and SYNC0; ETG.1000.6, their use at start-up).

Registers (all little endian): 0x0900 / 0x0904 / 0x0908 / 0x090C the receive times of ports 0-3 (32 bits of
local time; a write to 0x0900 latches, for the frame carrying it, when it reached each open port), 0x0918 the
same frame's receive time at the processing unit (64 bits); 0x0910 the system time (64 bits): read, local time
plus the offset 0x0920 when the frame passes; written (by the master, or by an FRMW / ARMW carrying the reference
clock's), compared with its own: the difference, its own less the received plus the system time delay 0x0928,
goes to 0x092C (bits 0-30 its magnitude, bit 31 set when the own copy is the smaller) and the time control loop
takes it up; 0x0980 cyclic unit control, 0x0981
activation (bit 0 cyclic operation, bit 1 SYNC0), 0x098E SYNC0 status (bit 0: a pulse since it was last read),
0x0990 the start time of cyclic operation (written: the system time of the first SYNC0 pulse; read while active:
that of the next), 0x09A0 the SYNC0 cycle time in ns.

The emulated clocks: an ESC's local time counts ns from its power-on, on the host's monotonic clock run
``drift_ppm`` fast (a crystal's error: tens of ppm; the same for every slave of the line); a frame reaches the
slave at position k ``k * HOP_NS`` after the first (the return path from the end of the line likewise), so a
master measures a propagation delay of ``HOP_NS`` per slave. The time control loop is ideal: it takes up the whole difference at each comparison (an ESC
slews its clock at a bounded rate and converges in milliseconds to seconds); a master's write of the offset
starts it afresh (no correction, no difference). A start time already past when cyclic operation is activated
never comes (a 64-bit system time does not wrap): no SYNC0 pulse, as on an ESC, until the master writes a new
one. Fault on request (``late_activations``): the first activations take effect HELD_OFF_NS late, as a master's
would when it is held off between reading the slave's time and activating.

What SYNC0 is for: a drive synchronised to SYNC0 takes the outputs a frame wrote at the next pulse, and latches
its inputs there (ETG.1020 / ETG.6010 "DC synchronous": the slave's application runs on the pulses, whatever the
frames' timing; :meth:`DistributedClock.pulses_since_taken`), so a master must write once in every SYNC0
interval. Each output write through an FMMU is placed in its interval
(:meth:`DistributedClock.outputs_written`): an interval without one is a pulse that took stale outputs
(``sync0_missed``), a second write into one overwrote outputs no pulse took (``sync0_doubled``), and where in its
interval the write came (``sync0_phase_us``: percentiles 1, 25, 50, 75, 99 of the last :data:`PHASES` writes) -- a master whose
cycle does not follow the reference clock drifts through the interval and crosses its edges.
"""
from __future__ import annotations

import struct
from collections import deque

import numpy as np

HOP_NS = 1000   # the emulated frame delay per slave: ESC forwarding and a 100BASE-TX link, about 1 us on hardware
REG_RECEIVE_TIME = 0x0900           # + 4n for port n
REG_SYSTEM_TIME, REG_RECEIVE_TIME_UNIT = 0x0910, 0x0918
REG_OFFSET, REG_DELAY, REG_DIFFERENCE = 0x0920, 0x0928, 0x092C
REG_ACTIVATION, REG_SYNC0_STATUS, REG_START_TIME, REG_SYNC0_CYCLE = 0x0981, 0x098E, 0x0990, 0x09A0
CYCLIC_OPERATION, SYNC0 = 0x01, 0x02
FEATURES = 0x000C                   # 0x0008 bits 2 (distributed clocks) and 3 (64-bit system time)
WRITABLE = ((0x0900, 0x0904), (0x0910, 0x0918), (0x0920, 0x092C), (0x0930, 0x0932), (0x0934, 0x0936),
            (0x0980, 0x0982), (0x0990, 0x0998), (0x09A0, 0x09A8))
_MASK64 = (1 << 64) - 1
HELD_OFF_NS = 150_000_000          # a late activation's delay: longer than SOEM's 100 ms start delay
PHASES = 1000                       # output writes whose phase in the SYNC0 interval the summary gives


def _touches(ado: int, end: int, lo: int, size: int) -> bool:
    return ado < lo + size and lo < end


class DistributedClock:
    """The DC unit of the ESC at ``position`` in the line, on ``memory``, powered on at ``power_on`` (monotonic s);
    ``downstream``: the slaves after it (the frame comes back to its port 1 from them), set by the line."""

    def __init__(self, memory: bytearray, position: int, power_on: float, drift_ppm: float = 0.0):
        self.memory = memory
        self.position = position
        self.power_on = power_on
        self.rate = 1.0 + drift_ppm * 1e-6
        self.downstream = 0
        self.correction = 0                 # ns the time control loop has added to the system time
        self.sync0 = None                   # (start, cycle) system times in ns while SYNC0 pulses
        self.late_start = False
        self.late_activations = 0           # fault on request: activations that arrive HELD_OFF_NS late
        self.activations = 0
        self._status_read = 0               # system time SYNC0 status was last read
        self._interval = None               # the SYNC0 interval of the last output write
        self.taken = None                   # the system time of the last SYNC0 pulse the application took
        self.missed = self.doubled = 0
        self.phases = deque(maxlen=PHASES)

    def local_ns(self, now: float, hops: int = 0) -> int:
        """Local time when a frame that entered the line at ``now`` has made ``hops`` hops."""
        return int(round((now - self.power_on) * self.rate * 1e9)) + hops * HOP_NS

    def system_ns(self, now: float) -> int:
        """System time when the frame of ``now`` passes this slave: local time plus the offset 0x0920."""
        offset = struct.unpack_from("<Q", self.memory, REG_OFFSET)[0]
        return (self.local_ns(now, self.position) + offset + self.correction) & _MASK64

    def next_sync0(self, system: int) -> int | None:
        if self.sync0 is None:
            return None
        start, cycle = self.sync0
        if system <= start or not cycle:
            return start
        return start + -(-(system - start) // cycle) * cycle

    @property
    def synchronous(self) -> bool:
        """SYNC0 pulses (activated in time, with a cycle): the slave's application runs on them."""
        return self.sync0 is not None and self.sync0[1] != 0

    def pulses_since_taken(self, now: float) -> tuple[float, float] | None:
        """The host times of the first and the latest SYNC0 pulse at or before ``now`` that the application has
        not taken yet (then all taken: :attr:`taken` the latest's system time), or None: no new pulse, or no
        SYNC0. A pulse comes at the same system time on every slave: the same host time, but for the clocks'
        residual error."""
        if not self.synchronous:
            return None
        start, cycle = self.sync0
        system = self.system_ns(now) - self.position * HOP_NS      # this clock now, not as a frame passes
        if system < start:
            return None
        latest = start + (system - start) // cycle * cycle
        if self.taken is not None and latest <= self.taken:
            return None
        first = latest if self.taken is None else self.taken + cycle
        self.taken = latest
        return now - (system - first) * 1e-9, now - (system - latest) * 1e-9

    def outputs_written(self, now: float) -> None:
        """An FMMU wrote outputs at ``now``: counted against the SYNC0 intervals (see the module)."""
        if self.sync0 is None or not self.sync0[1]:
            return
        start, cycle = self.sync0
        since = self.system_ns(now) - start
        if since < 0:
            return
        interval, phase = divmod(since, cycle)
        if self._interval is not None:
            if interval == self._interval:
                self.doubled += 1
            elif interval > self._interval + 1:
                self.missed += interval - self._interval - 1
        self._interval = interval
        self.phases.append(phase)

    # -- the ESC's side --------------------------------------------------------------------------------------

    def before_read(self, ado: int, end: int, now: float) -> None:
        """The registers a read of ``ado..end`` sees at ``now``: system time, next SYNC0, SYNC0 status."""
        m = self.memory
        if _touches(ado, end, REG_SYSTEM_TIME, 8):
            struct.pack_into("<Q", m, REG_SYSTEM_TIME, self.system_ns(now))
        if self.sync0 is not None and _touches(ado, end, REG_START_TIME, 8):
            struct.pack_into("<Q", m, REG_START_TIME, self.next_sync0(self.system_ns(now)))
        if _touches(ado, end, REG_SYNC0_STATUS, 1):
            system = self.system_ns(now)
            pulse = self.next_sync0(self._status_read + 1)
            m[REG_SYNC0_STATUS] = int(self.sync0 is not None and pulse is not None and pulse <= system)
            self._status_read = system

    def after_write(self, ado: int, data: bytes, now: float) -> None:
        """What a write of ``data`` at ``ado`` (already stored where writable) does at ``now``."""
        end = ado + len(data)
        m = self.memory
        if ado <= REG_RECEIVE_TIME < end:
            arrival = self.local_ns(now, self.position)
            back = self.local_ns(now, self.position + 2 * self.downstream) if self.downstream else 0
            struct.pack_into("<IIII", m, REG_RECEIVE_TIME, arrival & 0xFFFFFFFF, back & 0xFFFFFFFF, 0, 0)
            struct.pack_into("<Q", m, REG_RECEIVE_TIME_UNIT, arrival)
        if _touches(ado, end, REG_OFFSET, 8):
            self.correction = 0
            struct.pack_into("<I", m, REG_DIFFERENCE, 0)
        if ado <= REG_SYSTEM_TIME < end:
            width = min(8, end - REG_SYSTEM_TIME)
            if width in (4, 8):
                self._compare(int.from_bytes(data[REG_SYSTEM_TIME - ado:REG_SYSTEM_TIME - ado + width], "little"),
                              width, now)
        if ado <= REG_ACTIVATION < end:
            self._activate(m[REG_ACTIVATION], now)

    def _compare(self, received: int, width: int, now: float) -> None:
        bits = 8 * width
        delay = struct.unpack_from("<I", self.memory, REG_DELAY)[0]
        diff = (self.system_ns(now) - received - delay) & ((1 << bits) - 1)
        if diff >= 1 << (bits - 1):
            diff -= 1 << bits
        register = min(abs(diff), 0x7FFFFFFF) | (0x80000000 if diff < 0 else 0)
        struct.pack_into("<I", self.memory, REG_DIFFERENCE, register)
        self.correction -= diff

    def _activate(self, activation: int, now: float) -> None:
        self.sync0, self.late_start, self._interval, self.taken = None, False, None, None
        if activation & CYCLIC_OPERATION and activation & SYNC0:
            self.activations += 1
            start = struct.unpack_from("<Q", self.memory, REG_START_TIME)[0]
            cycle = struct.unpack_from("<I", self.memory, REG_SYNC0_CYCLE)[0]
            held_off = HELD_OFF_NS if self.activations <= self.late_activations else 0
            if start < self.system_ns(now) + held_off:
                self.late_start = True
            else:
                self.sync0 = (start, cycle)
                self._status_read = self.system_ns(now)

    def summary(self) -> dict:
        m = self.memory
        difference = struct.unpack_from("<I", m, REG_DIFFERENCE)[0]
        return {"offset_ns": struct.unpack_from("<Q", m, REG_OFFSET)[0], "correction_ns": self.correction,
                "delay_ns": struct.unpack_from("<I", m, REG_DELAY)[0],
                "difference_ns": -(difference & 0x7FFFFFFF) if difference >> 31 else difference,
                "sync0_start_ns": self.sync0[0] if self.sync0 else None,
                "sync0_cycle_ns": self.sync0[1] if self.sync0 else None, "sync0_late_start": self.late_start,
                "sync0_activations": self.activations,
                "sync0_missed": self.missed, "sync0_doubled": self.doubled,
                "sync0_phase_us": [round(float(p) / 1e3, 1) for p in np.percentile(self.phases, (1, 25, 50, 75, 99))]
                if self.phases else None}
