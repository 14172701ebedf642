"""A line of emulated slaves a frame passes through, each processing every datagram in turn (ETG.1000.4, the
DL protocol's addressing and working counter; ETG.1000.3, the DL services).

Per datagram and slave: auto-increment commands (APRD, APWR, APRW, ARMW) address the slave that sees ADP 0
and every slave increments ADP; configured-address commands (FPRD, FPWR, FPRW, FRMW) address the slave whose
station address (or alias, if enabled) is ADP; broadcast commands address every slave, each incrementing ADP,
BRD and BRW OR-ing what they read into the data; logical commands (LRD, LWR, LRW) go through each slave's
FMMUs. A read increments the working counter by 1, a write by 1, a read-write by 1 for the read and 2 for the
write; ARMW / FRMW: the addressed slave reads (+1), every other writes what it read (+1).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from rtctl.drivers.can import objects as ob

from .esc import OP, Esc
from .frame import AUTO_INCREMENT, BROADCAST, CONFIGURED, LOGICAL, READ_WRITES, READS, WRITES, Command, datagrams
from .sii import SiiLayout, SlaveIdentity, cia402_layout


class SlaveApplication:
    """A slave's side of the PDI, on its object dictionary ``od`` (:class:`.dictionary.ObjectDictionary`), whose
    objects the process data fill and are filled from (ETG.1000.6 5.6.7, the PDO mapping): ``outputs(state, od,
    now)`` in OP when new outputs arrived, reading the objects the master writes (``od.value(index)``);
    ``inputs(state, od, now)`` in SAFE-OP and OP, writing the objects the master reads (``od.set_value``);
    ``summary()``; ``fault(code, now)`` when the master writes an error code to 0x2001 (a fault on request) and
    ``emergencies()``, the emergency messages raised since the last call (each 8 bytes: error code, error
    register, 5 manufacturer bytes, ETG.1000.6 5.6.4), which the slave sends through its mailbox;
    ``left_op(state, now)`` once the slave has left OP for ``state`` (asked to, or its SM watchdog). ``device``:
    the drive whose CiA 402 objects the dictionary shares (None: the dictionary keeps them)."""

    device = None

    def outputs(self, state: int, od, now: float) -> None:
        pass

    def inputs(self, state: int, od, now: float) -> None:
        pass

    def fault(self, code: int, now: float) -> None:
        pass

    def left_op(self, state: int, now: float) -> None:
        pass

    def emergencies(self) -> list[bytes]:
        return []

    def summary(self) -> dict:
        return {}


EMERGENCY = struct.Struct("<HB5x")      # error code, error register, manufacturer bytes (none)
FAULT_RESET = 0x0080                    # controlword bit 7 (CiA 402-2)


class LoopbackAxis(SlaveApplication):
    """The stand-in CiA 402 axis without a plant, echoing each demand in its actual value: position actual
    0x6064 the last target position 0x607A received in OP, velocity actual 0x606C the target velocity 0x60FF,
    torque actual 0x6077 the target torque 0x6071, modes of operation display 0x6061 the mode 0x6060; the
    statusword 0x6041 "operation enabled" (0x0237) while the controlword 0x6040 commands enable operation (low
    nibble 0xF), else "switch on disabled" (0x0240). A fault on request latches "fault" (0x0208) and its error
    code in 0x603F with an emergency (error register bit 0, generic error) until the controlword's fault reset
    bit rises, which sends the error reset emergency (code 0)."""

    def __init__(self):
        self.controlword = 0
        self.target = 0
        self.velocity = 0
        self.torque = 0
        self.mode = 0
        self.received = 0
        self.fault_code = 0
        self._pending: list[bytes] = []

    def outputs(self, state: int, od, now: float) -> None:
        previous = self.controlword
        self.controlword, self.target = od.value(ob.CONTROLWORD), od.value(ob.TARGET_POSITION)
        self.velocity, self.torque = od.value(ob.TARGET_VELOCITY), od.value(ob.TARGET_TORQUE)
        self.mode = od.value(ob.MODES_OF_OPERATION)
        if self.fault_code and self.controlword & FAULT_RESET and not previous & FAULT_RESET:
            self.fault_code = 0
            self._pending.append(EMERGENCY.pack(0, 0))
        self.received += 1

    def inputs(self, state: int, od, now: float) -> None:
        enabled = state == OP and self.controlword & 0x0F == 0x0F
        statusword = 0x0208 if self.fault_code else 0x0237 if enabled else 0x0240
        for index, value in ((ob.STATUSWORD, statusword), (ob.POSITION_ACTUAL, self.target),
                             (ob.VELOCITY_ACTUAL, self.velocity), (ob.TORQUE_ACTUAL, self.torque),
                             (ob.MODES_DISPLAY, self.mode), (ob.ERROR_CODE, self.fault_code)):
            od.set_value(index, 0, value)

    def fault(self, code: int, now: float) -> None:
        if code and not self.fault_code:
            self.fault_code = code
            self._pending.append(EMERGENCY.pack(code, 0x01))

    def emergencies(self) -> list[bytes]:
        out, self._pending = self._pending, []
        return out

    def summary(self) -> dict:
        return {"controlword": self.controlword, "target_position": self.target, "mode": self.mode,
                "target_velocity": self.velocity, "target_torque": self.torque,
                "outputs_received": self.received, "fault_code": self.fault_code}


@dataclass
class ChainCounters:
    frames: int = 0
    datagrams: int = 0
    malformed: int = 0


class EscChain:
    """``slaves``: the ESCs in line order. :meth:`process` runs a frame (EtherCAT header onward) through
    them in place, :meth:`tick` lets their PDIs run between frames."""

    def __init__(self, slaves: list[Esc]):
        self.slaves = slaves
        for k, esc in enumerate(slaves):
            esc.clock.downstream = len(slaves) - 1 - k
        self.counters = ChainCounters()

    @classmethod
    def cia402(cls, n: int, identity: SlaveIdentity, now: float = 0.0, layout: SiiLayout | None = None,
               applications: list | None = None, drift_ppm: float = 0.0):
        """``n`` CiA 402 drives (the SII's PDOs: the minimal process image), serial numbers 1..n; behind each
        its application (default: a :class:`LoopbackAxis`); their clocks ``drift_ppm`` fast (.dc)."""
        applications = applications or [LoopbackAxis() for _ in range(n)]
        slaves = []
        for k in range(n):
            ident = SlaveIdentity(identity.vendor_id, identity.product_code, identity.revision, k + 1,
                                  identity.name, identity.group)
            slaves.append(Esc(k, k == n - 1, layout or cia402_layout(ident), applications[k], now,
                              drift_ppm))
        return cls(slaves)

    def process(self, frame: bytearray, now: float, pdi: bool = True) -> bool:
        """Run ``frame`` through the line; False (and the frame untouched) if it is not a well-formed
        EtherCAT frame. ``pdi``: each slave's PDI takes its turn as the frame leaves it; without, the caller
        runs them (:meth:`tick`) once the frame is on its way back, as the slaves' hardware forwards a frame
        without waiting for their applications."""
        try:
            dgrams = datagrams(frame)
        except ValueError:
            self.counters.malformed += 1
            return False
        self.counters.frames += 1
        self.counters.datagrams += len(dgrams)
        for esc in self.slaves:
            esc.now = now
            esc.synchronise(now)                  # the SYNC0 pulses before the frame (DC synchronous)
        for esc in self.slaves:
            for d in dgrams:
                self._datagram(esc, d, now)
            if pdi:
                esc.exchange(now)
        return True

    def tick(self, now: float) -> None:
        for esc in self.slaves:
            esc.now = now
            esc.exchange(now)

    @staticmethod
    def _datagram(esc: Esc, d, now: float) -> None:
        command = d.command
        if command in LOGICAL:
            d.wkc = d.wkc + esc.logical(command, d.logical_address, d.data, now)
            return
        if command in AUTO_INCREMENT or command in BROADCAST:
            adp = d.adp
            d.adp = adp + 1
            addressed = command in BROADCAST or adp == 0
        elif command in CONFIGURED:
            addressed = esc.matches_configured(d.adp)
        else:
            return                                            # NOP, or a command this ESC does not know
        if command in (Command.ARMW, Command.FRMW):
            if addressed:
                d.data[:] = esc.read(d.ado, d.length)
            else:
                esc.write(d.ado, bytes(d.data))
            d.wkc = d.wkc + 1
            return
        if not addressed:
            return
        data = d.data
        if esc.refuses(d.ado, d.length, command in WRITES):
            return
        if command in READS:
            _read_into(data, esc.read(d.ado, d.length), command == Command.BRD)
            d.wkc = d.wkc + 1
        elif command in WRITES:
            esc.write(d.ado, bytes(data))
            d.wkc = d.wkc + 1
        elif command in READ_WRITES:
            _read_into(data, esc.read_write(d.ado, bytes(data)), command == Command.BRW)
            d.wkc = d.wkc + 3

    def summary(self) -> dict:
        return {"frames": self.counters.frames, "datagrams": self.counters.datagrams,
                "malformed": self.counters.malformed,
                "slaves": [dict(esc.summary(), **esc.application.summary()) for esc in self.slaves]}


def _read_into(data: memoryview, value: bytes, bitwise_or: bool) -> None:
    if bitwise_or:
        data[:] = bytes(a | b for a, b in zip(data, value))
    else:
        data[:] = value
