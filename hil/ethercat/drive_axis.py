"""The CAN emulator's CiA 402 drive model and plant behind the emulated EtherCAT slaves, so that both buses
drive the same physics: one :class:`~rtctl.hil.can_emulator.Cia402Emulator` (its drives, gearing and
:class:`~rtctl.hil.plant_clock.PlantClock`) with no CAN bus, one :class:`DriveAxis` per slave.

Each process data frame is the drives' SYNC: the outputs written (modes of operation 0x6060, target position
0x607A, then the controlword 0x6040, as CiA 402-2 orders a cyclic write) go to the drive as an RPDO would, the
plant is advanced to the frame's time and the inputs carry the statusword 0x6041, position actual 0x6064 (motor
increments) and modes of operation display 0x6061. A value the drive refuses (an SDO abort on CAN) leaves the
object as it was and is counted.
"""
from __future__ import annotations

from canopen.sdo import SdoAbortedError

from rtctl.drivers.can import objects as ob

from ..can_emulator import Cia402Emulator, build_plant
from .chain import PROCESS_IMAGE, SlaveApplication


class NoBus:
    """The CAN bus a drive would answer on: its SDO replies and TPDOs go nowhere here, its EMCYs (COB-ID
    0x80 + node ID, CiA 301 7.2.7) are kept per node for the slave's mailbox (the same 8 bytes as a CoE
    emergency, ETG.1000.6 5.6.4)."""

    def __init__(self):
        self.emergencies: dict[int, list[bytes]] = {}

    def send(self, message) -> None:
        if 0x81 <= message.arbitration_id <= 0xFF:
            self.emergencies.setdefault(message.arbitration_id - 0x80, []).append(bytes(message.data))

    def recv(self, timeout=None):
        return None


class DriveAxis(SlaveApplication):
    """Slave ``k``'s application: drive ``k`` of ``drives`` (an emulator of as many drives as joints). A fault
    on request is the drive's own fault injection (0x2001): its fault reaction and its EMCY."""

    def __init__(self, drives: Cia402Emulator, k: int):
        self.drives = drives
        self.drive = drives.drives[k]
        self.received = 0
        self.refused = 0

    def outputs(self, state: int, data: bytes, now: float) -> None:
        controlword, target, mode = PROCESS_IMAGE.unpack_from(data)
        d = self.drive
        d.now = now
        for index, value in ((ob.MODES_OF_OPERATION, mode), (ob.TARGET_POSITION, target),
                             (ob.CONTROLWORD, controlword)):
            if d.values[(index, 0)] != value or index == ob.CONTROLWORD:
                try:
                    d.write(index, 0, value)
                except SdoAbortedError:
                    self.refused += 1
        self.received += 1

    def inputs(self, state: int, now: float) -> bytes:
        self.drives.sample(now)
        self.drive.tick(now)
        d = self.drive
        return PROCESS_IMAGE.pack(d.statusword(), d.position, d.values[(ob.MODES_OF_OPERATION, 0)])

    def fault(self, code: int, now: float) -> None:
        self.drive.now = now
        self.drive.write(ob.FAULT_INJECTION, 0, code)

    def emergencies(self) -> list[bytes]:
        return self.drives.bus.emergencies.pop(self.drive.id, [])

    def summary(self) -> dict:
        d = self.drive
        return {"controlword": d.controlword, "target_position": d.values[(ob.TARGET_POSITION, 0)],
                "mode": d.values[(ob.MODES_OF_OPERATION, 0)], "drive_state": d.state, "position": d.position,
                "torque": d.applied, "outputs_received": self.received, "refused": self.refused}


def drive_axes(robot: str, ratio: float = 10.0, initial=None, mjcf: str | None = None) -> list[DriveAxis]:
    """One axis per actuated joint of ``robot`` (as a run config's ``[robot] model`` names it, or ``mjcf``
    simulated by MuJoCo), geared by ``ratio`` motor turns per joint turn."""
    plant, v_index = build_plant(robot, None, initial, mjcf)
    drives = Cia402Emulator(NoBus(), plant, v_index, list(range(1, len(v_index) + 1)), ratio=ratio)
    return [DriveAxis(drives, k) for k in range(len(v_index))]
