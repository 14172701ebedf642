"""The CAN emulator's CiA 402 drive model and plant behind the emulated EtherCAT slaves, so that both buses
drive the same physics: one :class:`~rtctl.hil.can_emulator.Cia402Emulator` (its drives, gearing and
:class:`~rtctl.hil.plant_clock.PlantClock`) with no CAN bus, one :class:`DriveAxis` per slave.

The slave's object dictionary shares the drive's CiA 402 objects (an SDO reads and writes them in the drive:
its ranges, its state machine, its live actual values; :mod:`.dictionary`). Each process data frame is the
drive's SYNC, or with SYNC0 running each SYNC0 pulse (the slave's application runs on them, .esc): the plant is
advanced to that time under the demands so far, then the outputs, whatever
PDO mapping carried them into the objects, go to the drive as synchronous RPDOs do at a SYNC (CiA 301 7.2.2)
-- modes of operation 0x6060, target position 0x607A, target velocity 0x60FF, target torque 0x6071, torque
offset 0x60B2, then the controlword 0x6040, the demands before the command that acts on them (CiA 402-2 6.3
and 6.4); the drive's
actual values then go to the objects the inputs map: statusword 0x6041, modes of operation display 0x6061,
position actual 0x6064 (increments of the motor shaft, 0x608F), velocity actual 0x606C (increments/s), torque
actual 0x6077 (per mille of the rated torque 0x6076, the torque made since the last frame) and error code
0x603F. A value the drive refuses (an SDO abort on CAN) leaves the drive's object as it was
and is counted. Between frames the plant moves only while a drive ramps on its own clock (a quick stop, a
fault reaction), as on CAN between SYNCs: a master that configures the line, or has gone, does not drop the arm
before its drives have been enabled.
"""
from __future__ import annotations

import numpy as np
from canopen.sdo import SdoAbortedError

from rtctl.drivers.can import objects as ob

from ..can_emulator import Cia402Emulator, build_plant
from .chain import SlaveApplication

LOST_MASTER = 0x8100                    # CiA 301 error code: communication
DEMANDS = (ob.MODES_OF_OPERATION, ob.TARGET_POSITION, ob.TARGET_VELOCITY, ob.TARGET_TORQUE, ob.TORQUE_OFFSET,
           ob.CONTROLWORD)
ACTUALS = (ob.STATUSWORD, ob.MODES_DISPLAY, ob.POSITION_ACTUAL, ob.VELOCITY_ACTUAL, ob.TORQUE_ACTUAL,
           ob.ERROR_CODE)


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
        self.drive = self.device = drives.drives[k]
        self.received = 0
        self.refused = 0
        self.torque_offset_peak = 0            # the largest |0x60B2| the outputs brought, per mille

    def outputs(self, state: int, od, now: float) -> None:
        self.drives.sample(now)
        d = self.drive
        d.now = now
        for index in DEMANDS:
            value = od.value(index)
            if d.values[(index, 0)] != value or index == ob.CONTROLWORD:
                try:
                    d.write(index, 0, value)
                except SdoAbortedError:
                    self.refused += 1
        self.received += 1
        self.torque_offset_peak = max(self.torque_offset_peak, abs(d.values[(ob.TORQUE_OFFSET, 0)]))

    def inputs(self, state: int, od, now: float) -> None:
        self.drives.between_syncs(now)
        self.drive.tick(now)
        for index in ACTUALS:
            od.set_value(index, 0, self.drive.read(index, 0))

    def left_op(self, state: int, now: float) -> None:
        """The connection to the master lost (ETG.6010: a drive leaving OP stops as its abort connection option
        code 0x6007 says, CiA 402-2; error code 0x8100, communication, as the CAN drives' for a lost master)."""
        self.drive.now = now
        self.drive.abort_connection(LOST_MASTER, now)

    def fault(self, code: int, now: float) -> None:
        self.drive.now = now
        self.drive.write(ob.FAULT_INJECTION, 0, code)

    def emergencies(self) -> list[bytes]:
        return self.drives.bus.emergencies.pop(self.drive.id, [])

    def summary(self) -> dict:
        d = self.drive
        return {"controlword": d.controlword, "target_position": d.values[(ob.TARGET_POSITION, 0)],
                "target_velocity": d.values[(ob.TARGET_VELOCITY, 0)],
                "target_torque": d.values[(ob.TARGET_TORQUE, 0)], "torque_offset": d.values[(ob.TORQUE_OFFSET, 0)],
                "torque_offset_peak": self.torque_offset_peak,
                "mode": d.values[(ob.MODES_OF_OPERATION, 0)],
                "drive_state": d.state, "position_actual": d.position, "velocity": d.velocity, "torque": d.applied,
                "outputs_received": self.received, "refused": self.refused,
                "plant_skipped_s": self.drives.clock.skipped}


def drive_axes(robot: str, ratio: float = 10.0, initial=None, mjcf: str | None = None,
               rated_torque=None) -> list[DriveAxis]:
    """One axis per actuated joint of ``robot`` (as a run config's ``[robot] model`` names it, or ``mjcf``
    simulated by MuJoCo), geared by ``ratio`` motor turns per joint turn, each drive's rated torque
    ``rated_torque`` N m at the motor (one for all, or one per joint; default 1 N m)."""
    plant, v_index = build_plant(robot, None, initial, mjcf)
    if rated_torque is not None and np.size(rated_torque) not in (1, len(v_index)):
        raise ValueError(f"{np.size(rated_torque)} rated torques for {len(v_index)} joints (give one, or one each)")
    rated = 1000 if rated_torque is None else np.round(np.asarray(rated_torque, dtype=float) * 1e3).astype(int)
    drives = Cia402Emulator(NoBus(), plant, v_index, list(range(1, len(v_index) + 1)), ratio=ratio,
                            rated_torque_mnm=rated)
    return [DriveAxis(drives, k) for k in range(len(v_index))]
