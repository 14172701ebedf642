"""CiA 402 drives over EtherCAT (CoE) through SOEM: the ``ethercat`` backend.

pysoem (the Python binding of SOEM, the open EtherCAT master) does the line: the scan, the mailbox, the
mapping, the AL states and the frame exchange (with the GIL released while it waits). This driver does the
rest, by the standards:

* ``configure``: opens ``ethercat_interface``, scans the line and checks each configured slave's identity (SII
  vendor id, product code and revision, ETG.1000.6 / ETG.2010) against the config, naming the slave and both
  identities on a mismatch; reads each drive's supported modes 0x6502 (the mode's bit required), rated torque
  0x6076, max torque 0x6072, encoder resolution 0x608F and gear ratio 0x6091 (which must agree with the
  config's ``gear_ratio``) by SDO in PRE-OP, writes the mode of operation 0x6060 (cyclic synchronous torque
  for ``mode = "effort"``, position for ``"position"``, velocity for ``"velocity"``) and the quick stop option
  code 0x605A if configured; maps the process data (:mod:`.pdo`: written by SDO in PRE-OP with ``pdo_mapping = "config"``, the slave's
  own read back with ``"slave"``; an SDO abort names the slave, object and abort code), sets each slave's sync
  manager watchdog (``watchdog``; the slave takes its outputs off and drops to SAFE-OP when no frame writes
  them for that long: a dead master stops the drives, ETG.1000.4 watchdogs) and, with ``distributed_clocks``,
  SYNC0 at the loop period (ETG.1000.4 distributed clocks; the reference clock's system time is read in every
  frame, and its offset from the master's clock is reported; with ``follow_reference_clock`` the loop's cycle
  follows it, :mod:`.clock`), then takes the line to SAFE-OP, naming every
  slave that stays behind with its AL status code.
* ``activate``: OP (the outputs already valid in every frame), then each drive's power state machine
  (CiA 402-2 6.3) to OPERATION ENABLED, a position drive's target held at its actual position on the way.
* Each cycle: ``write`` packs each drive's controlword and target (SI through the transmission into motor
  increments, increments/s or per mille of the rated torque) and sends the frame: the effort; the set point's
  position; or its velocity with the position error through kp / kd (:func:`~rtctl.drivers.base.
  velocity_set_point`), with ``torque_offset`` the effort as the feed-forward torque offset 0x60B2 (CiA 402-2
  6.4). While a joint's stiffness is 0 (the safe command) its drive holds where it was then, by its own loops
  alone, not where the trajectory goes (:meth:`EthercatDriver._targets`); ``read`` receives it (``read_timeout``),
  checks the working counter against the one the mapping expects (ETG.1000.4: LRW counts 1 per slave read and
  2 per slave written), unpacks statusword, positions, velocities, torques. Never raises: a wrong working
  counter or a lost frame is counted, ``max_failed_cycles`` of them in a row latch a fault (naming the slaves
  that left OP, or the link), a lost link latches it at once (the interface's carrier, read by ioctl), as does a
  drive leaving OPERATION ENABLED (its statusword's state and error code 0x603F, and the emergency it sent,
  read from its mailbox then: :mod:`.emergency`). One slave's mailbox is read every ``mailbox_poll_cycles``.
* ``safe_stop``: the quick stop command to every drive (each stops as its 0x605A says), in frames that keep
  coming; ``deactivate``: quick stop until the drives report it done (or ``activate_timeout``), disable voltage,
  SAFE-OP.

Units inside: positions in increments of the motor shaft (``0x608F``), velocities in increments/s, torques in
per mille of the rated torque (CiA 402-2). ``close`` closes the master (SOEM's socket).
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..base import EFFORT_MODE, MODES, POSITION_MODE, ActuatorDriver, DriverHealth, velocity_set_point
from ..can import objects as ob
from ..cia402 import (CW_DISABLE_VOLTAGE, CW_ENABLE_OPERATION, CW_QUICK_STOP, SW_OPERATION_ENABLED,
                      SW_OPERATION_ENABLED_MASK, next_controlword, state_of)
from ..hold import SetPointHold
from ..transmission import Transmission
from . import pdo
from .clock import ReferenceClockFollower, start_sync0
from .emergency import Emergencies
from .line import (LinkWatch, al_status_name, identity_line, sdo, sdo_abort_name, set_watchdog, state_name,
                   states_line)
from .options import EthercatOptions, per_slave

SAFE_OP, OP, PRE_OP = 4, 8, 2
NO_FRAME = -1


class EthercatDriver(ActuatorDriver):
    """One CiA 402 drive per joint, slaves of one EtherCAT line."""

    Options = EthercatOptions
    modes = MODES                    # cyclic synchronous torque, position, velocity
    # A cycle's outputs leave in its write's frame; the inputs that frame brings back were latched by each slave
    # when the frame before passed (free run, without distributed clocks), and the next read takes them.
    latency_cycles = 2

    @classmethod
    def from_config(cls, options: dict, context) -> "EthercatDriver":
        return cls(context.model, cls.Options(**options), transmission=context.transmission,
                   period=context.period)

    def __init__(self, model, options: "EthercatDriver.Options | None" = None, *,
                 transmission: Transmission | None = None, period: float = 1e-3):
        super().__init__(model, options)
        o = self.options
        n = len(self.v_index)
        self.name = f"driver[ethercat {o.ethercat_interface}]"
        self.positions = per_slave(f"{self.name}: slave_positions", o.slave_positions, n) or list(range(n))
        if len(set(self.positions)) != n:
            raise ValueError(f"{self.name}: slave_positions {self.positions} name a slave twice")
        self.vendor_id = per_slave(f"{self.name}: vendor_id", o.vendor_id, n)
        self.product_code = per_slave(f"{self.name}: product_code", o.product_code, n)
        self.revision = per_slave(f"{self.name}: revision", o.revision, n)
        self.encoder_counts = per_slave(f"{self.name}: encoder_counts", o.encoder_counts, n)
        self.rated_torque = per_slave(f"{self.name}: rated_torque", o.rated_torque, n)
        self.transmission = transmission or Transmission(n)
        if self.transmission.n != n:
            raise ValueError(f"{self.name}: transmission is for {self.transmission.n} joints, driver has {n}")
        self.period = float(period)
        self.master = None
        self.link: LinkWatch | None = None
        self.emergencies: Emergencies | None = None
        self.inputs: list[pdo.Image] = []
        self.outputs: list[pdo.Image] = []
        self.rad_per_increment = np.zeros(n)
        self.nm_per_permille = np.zeros(n)
        self.max_torque_permille = np.zeros(n)
        self.statusword = np.zeros(n, dtype=np.int64)
        self.error_code = np.zeros(n, dtype=np.int64)
        self._controlword = [CW_DISABLE_VOLTAGE] * n
        self._a_pos, self._a_vel, self._a_tau = np.zeros(n), np.zeros(n), np.zeros(n)
        self._j_vec, self._j_cmd, self._cmd = np.zeros(n), np.zeros(n), np.zeros(n)
        self.hold = SetPointHold(n)                # where a joint of stiffness 0 is sent (position, velocity)
        self._hold_gain, self._j_vel, self._stop_motor = np.zeros(n), np.zeros(n), np.full(n, np.inf)
        self._offset = np.zeros(n)                 # per mille of the rated torque (0x60B2)
        if o.torque_offset and self.mode == EFFORT_MODE:
            raise ValueError(f"{self.name}: torque_offset = true is for mode = 'position' or 'velocity' (in "
                             f"'effort' the target torque is the effort)")
        self._buffers: list[bytearray] = []
        self._values: list[list] = []
        self._awaiting = False
        self._failed = 0
        self._quick_stop = False
        self._dc_start = None
        self.follower = ReferenceClockFollower(self.period) if o.distributed_clocks and o.follow_reference_clock \
            else None
        self.expected_wkc = 0
        self.last_wkc = 0
        self.saturated_cycles = 0
        self._reset_health()

    def _reset_health(self) -> None:
        self.health = DriverHealth()
        self.health.extra.update(lost_frames=0, wrong_wkc=0, dc_offset_ns=0, dc_phase_error_ns=0, emergencies=0,
                                 sync0_restarts=0)

    # -- configuration: SDO and state changes, not real time ----------------------------------------------
    def on_configure(self) -> None:
        try:
            import pysoem
        except ImportError:
            raise RuntimeError(f"{self.name}: the ethercat backend needs pysoem: pip install 'rtctl[ethercat]'") \
                from None
        self._reset_health()
        self.close()
        o = self.options
        master = pysoem.Master()
        try:
            master.open(o.ethercat_interface)
        except Exception as exc:  # noqa: BLE001  (pysoem raises ConnectionError or OSError)
            raise OSError(f"{self.name}: cannot open interface {o.ethercat_interface!r} (needs root or "
                          f"CAP_NET_RAW and an existing interface): {exc}") from None
        self.master = master
        master.always_release_gil = True
        found = master.config_init()
        need = max(self.positions) + 1
        if found < need:
            raise RuntimeError(f"{self.name}: {max(found, 0)} slaves answered on {o.ethercat_interface!r}; the "
                               f"config needs slave positions {self.positions}")
        for k, position in enumerate(self.positions):
            self._check_identity(k, master.slaves[position])
        self.emergencies = Emergencies([master.slaves[p] for p in self.positions], o.mailbox_poll_cycles)
        for k, position in enumerate(self.positions):
            self._configure_drive(k, master.slaves[position])
        decel = self.hold.deceleration              # the motors' through the transmission (exact where diagonal)
        self.transmission.to_joint_position(np.where(np.isfinite(self._stop_motor), self._stop_motor, 0.0), decel)
        np.abs(decel, out=decel)
        decel[~(decel > 0)] = np.inf                # a drive without 0x6085: its joint held at once
        try:
            master.config_map()
        except pysoem.ConfigMapError as exc:
            raise RuntimeError(f"{self.name}: mapping the process data failed: "
                               + "; ".join(self._mailbox_error(e) for e in exc.error_list)) from None
        except pysoem.SdoError as exc:
            raise RuntimeError(f"{self.name}: slave {exc.slave_pos - 1}: mapping the process data: "
                               f"{sdo_abort_name(exc)}") from None
        self._check_images()
        for position in self.positions:
            set_watchdog(master.slaves[position], o.watchdog, f"{self.name}: slave {position}")
        if o.distributed_clocks:
            self._start_distributed_clocks()
        if master.state_check(SAFE_OP, 200_000) != SAFE_OP:
            raise RuntimeError(f"{self.name}: the line did not reach SAFE-OP: {states_line(master, self.positions)}")
        self.expected_wkc = master.expected_wkc
        self.link = LinkWatch(o.ethercat_interface)
        self._awaiting = False
        self._failed = 0

    def _check_identity(self, k: int, slave) -> None:
        want = [("vendor id", self.vendor_id, slave.man), ("product code", self.product_code, slave.id),
                ("revision", self.revision, slave.rev)]
        wrong = [f"{what} 0x{config[k]:08X}" for what, config, found in want if config and config[k] != found]
        if wrong:
            raise RuntimeError(f"{self.name}: slave {self.positions[k]} (joint {self.joint_names[k]!r}) is "
                               f"{identity_line(slave)}; the config says {', '.join(wrong)}")

    def _sdo(self, k: int, slave, index: int, subindex: int, fmt: str | None = None, data: bytes | None = None,
             optional: bool = False):
        return sdo(slave, f"{self.name}: slave {self.positions[k]} (joint {self.joint_names[k]!r})", index, subindex,
                   fmt, data, optional)

    def _configure_drive(self, k: int, slave) -> None:
        mode = pdo.MODE_OF_OPERATION[self.mode]
        supported = self._sdo(k, slave, ob.SUPPORTED_MODES, 0, "<I")
        if not supported & ob.SUPPORTED_MODE_BIT[mode]:
            raise RuntimeError(f"{self.name}: slave {self.positions[k]} does not support mode of operation {mode} "
                               f"(0x6502 = 0x{supported:08X})")
        self._sdo(k, slave, ob.MODES_OF_OPERATION, 0, data=bytes([mode]))
        if self.options.quick_stop_option is not None:
            self._sdo(k, slave, ob.QUICK_STOP_OPTION, 0, data=self.options.quick_stop_option.to_bytes(2, "little"))
        if self.rated_torque:
            rated = self.rated_torque[k] * 1e3
        else:
            rated = self._sdo(k, slave, ob.RATED_TORQUE, 0, "<I")
        if self.encoder_counts:
            increments, revolutions = self.encoder_counts[k], 1
        else:
            increments = self._sdo(k, slave, ob.ENCODER_RESOLUTION, 1, "<I")
            revolutions = self._sdo(k, slave, ob.ENCODER_RESOLUTION, 2, "<I")
        if not rated > 0 or not increments > 0 or not revolutions > 0:
            raise RuntimeError(f"{self.name}: slave {self.positions[k]} reports rated torque {rated} mN m, encoder "
                               f"{increments} increments per {revolutions} revolutions")
        self.nm_per_permille[k] = rated / 1e6
        self.rad_per_increment[k] = 2 * np.pi * revolutions / increments
        self.max_torque_permille[k] = self._sdo(k, slave, ob.MAX_TORQUE, 0, "<H")
        if self.mode != EFFORT_MODE:        # the hold's stop (drivers.hold): the drive's own quick stop ramp
            decel = self._sdo(k, slave, ob.QUICK_STOP_DECELERATION, 0, "<I", optional=True)
            self._stop_motor[k] = decel * self.rad_per_increment[k] if decel else np.inf
        self._check_gear_ratio(k, slave)
        if self.options.pdo_mapping == "config":
            slave.config_func = lambda position, mode=self.mode: self._map(k, slave, mode)

    def _check_gear_ratio(self, k: int, slave) -> None:
        """The config's ratio against the drive's 0x6091 (motor : shaft revolutions), where the drive has one."""
        motor = self._sdo(k, slave, ob.GEAR_RATIO, 1, "<I", optional=True)
        shaft = self._sdo(k, slave, ob.GEAR_RATIO, 2, "<I", optional=True)
        if motor is None or shaft is None:
            return
        ratio = abs(self.transmission.matrix[k, k])
        if shaft and self.transmission.is_diagonal and not np.isclose(motor / shaft, ratio, 1e-6):
            raise RuntimeError(f"{self.name}: slave {self.positions[k]}: the drive's gear ratio 0x6091 is "
                               f"{motor}:{shaft} (motor:shaft revolutions, {motor / shaft:g}), the config's "
                               f"[driver] gear_ratio is {ratio:g}: make them agree")

    def _map(self, k: int, slave, mode: str) -> None:
        """pysoem's configuration hook (PRE-OP, before the slave's mapping is read): this driver's PDOs."""
        def write(index, subindex, data):
            self._sdo(k, slave, index, subindex, data=data)
        pdo.write_mapping(write, pdo.RX_ASSIGN, pdo.RX_PDO,
                          [pdo.Entry.of(i) for i in pdo.outputs(mode, self.options.torque_offset)])
        pdo.write_mapping(write, pdo.TX_ASSIGN, pdo.TX_PDO, [pdo.Entry.of(i) for i in pdo.INPUTS])

    def _mailbox_error(self, error) -> str:
        position = getattr(error, "slave_pos", 0) - 1
        if hasattr(error, "abort_code"):
            return f"slave {position}: {sdo_abort_name(error)}"
        return f"slave {position}: {type(error).__name__} {getattr(error, 'desc', '')}".rstrip()

    def _check_images(self) -> None:
        """Where the objects sit in each slave's bytes, from its mapping as the slave holds it now."""
        self.inputs, self.outputs, self._buffers, self._values = [], [], [], []
        for k, position in enumerate(self.positions):
            slave = self.master.slaves[position]
            read = lambda index, subindex, k=k, slave=slave: self._sdo(k, slave, index, subindex)  # noqa: E731
            outputs = pdo.Image(pdo.read_mapping(read, pdo.RX_ASSIGN))
            inputs = pdo.Image(pdo.read_mapping(read, pdo.TX_ASSIGN))
            where = f"{self.name}: slave {position} (joint {self.joint_names[k]!r})"
            missing = outputs.missing(pdo.required_outputs(self.mode, self.options.torque_offset)) \
                + inputs.missing(pdo.REQUIRED_INPUTS)
            if missing:
                raise RuntimeError(f"{where}: its process data lacks {', '.join(f'0x{i:04X}' for i in missing)} "
                                   f"(outputs: {outputs.describe()}; inputs: {inputs.describe()}); set "
                                   f"pdo_mapping = \"config\" or map them")
            if (outputs.size, inputs.size) != (len(slave.output), len(slave.input)):
                raise RuntimeError(f"{where}: the master mapped {len(slave.output)} output and {len(slave.input)} "
                                   f"input bytes, its PDOs hold {outputs.size} and {inputs.size}")
            self.outputs.append(outputs)
            self.inputs.append(inputs)
            self._buffers.append(bytearray(outputs.size))
            self._values.append([0] * len(outputs.fields))

    def _start_distributed_clocks(self) -> None:
        if not self.master.config_dc():
            raise RuntimeError(f"{self.name}: distributed_clocks = true, but no slave on the line has distributed "
                               f"clocks")
        self.health.extra["sync0_restarts"] = start_sync0(self.master, self.positions, self.period, self.name)

    # -- the frame -------------------------------------------------------------------------------------------
    def _pack(self, targets) -> None:
        """Outputs of every slave into pysoem's image: controlword, mode, target, torque offset."""
        slaves, mode = self.master.slaves, pdo.MODE_OF_OPERATION[self.mode]
        target_index = pdo.TARGET[self.mode]
        for k, position in enumerate(self.positions):
            image, values = self.outputs[k], self._values[k]
            at = image.position
            values[at[ob.CONTROLWORD]] = self._controlword[k]
            values[at[target_index]] = int(targets[k])
            if ob.TORQUE_OFFSET in at:
                values[at[ob.TORQUE_OFFSET]] = int(self._offset[k])
            if ob.MODES_OF_OPERATION in at:
                values[at[ob.MODES_OF_OPERATION]] = mode
            image.struct.pack_into(self._buffers[k], 0, *values)
            slaves[position].output = bytes(self._buffers[k])

    def _send(self, targets) -> None:
        self._pack(targets)
        self.master.send_processdata()
        self._awaiting = True

    def _receive(self) -> int:
        """The frame sent last, unpacked; its working counter (NO_FRAME if none came back in time)."""
        wkc = self.master.receive_processdata(int(self.options.read_timeout * 1e6))
        self._awaiting = False
        self.last_wkc = wkc
        if wkc != self.expected_wkc:
            return wkc
        slaves = self.master.slaves
        for k, position in enumerate(self.positions):
            image = self.inputs[k]
            values = image.struct.unpack_from(slaves[position].input)
            at = image.position
            self.statusword[k] = values[at[ob.STATUSWORD]]
            self._a_pos[k] = values[at[ob.POSITION_ACTUAL]] * self.rad_per_increment[k]
            self._a_vel[k] = values[at[ob.VELOCITY_ACTUAL]] * self.rad_per_increment[k]
            if ob.TORQUE_ACTUAL in at:
                self._a_tau[k] = values[at[ob.TORQUE_ACTUAL]] * self.nm_per_permille[k]
            if ob.ERROR_CODE in at:
                self.error_code[k] = values[at[ob.ERROR_CODE]]
        return wkc

    def _hold_targets(self) -> np.ndarray:
        """Each drive's target that moves nothing (zero torque or velocity, or its actual position in increments),
        in the command buffer."""
        cmd = self._cmd
        self._offset[:] = 0.0
        if self.mode == POSITION_MODE:
            np.divide(self._a_pos, self.rad_per_increment, out=cmd)
            np.round(cmd, out=cmd)
        else:
            cmd[:] = 0.0
        return cmd

    def _targets(self, command, now: float) -> None:
        """Joint targets into ``_j_cmd`` in position or velocity mode: the set point's position, or its velocity
        with the position error through kp / kd (:func:`~rtctl.drivers.base.velocity_set_point`), where its
        stiffness is positive and its set point finite. Else (the safe command's stiffness 0, a kp of 0, or a
        non-finite set point) the drive stops and holds (:class:`~rtctl.drivers.hold.SetPointHold`, at its quick
        stop deceleration): the hold's position, or its velocity with the error from its position at the last
        finite kp / kd used (none before: the velocity alone)."""
        tr, hold = self.transmission, self.hold
        tr.to_joint_position(self._a_pos, self._j_vec)
        tr.to_joint_position(self._a_vel, self._j_vel)
        by_velocity = self.mode != POSITION_MODE
        for k in range(len(self.v_index)):
            iv = self.v_index[k]
            stiffness, damping = command.stiffness[iv], command.damping[iv]
            if stiffness > 0.0 and math.isfinite(stiffness) and math.isfinite(command.position[iv]) \
                    and math.isfinite(command.velocity[iv]):
                hold.active[k] = False
                if not by_velocity:
                    self._j_cmd[k] = command.position[iv]
                    continue
                self._j_cmd[k] = velocity_set_point(command, iv, self._j_vec[k])
                if damping > 0.0 and math.isfinite(stiffness / damping):
                    self._hold_gain[k] = stiffness / damping
                continue
            hold.update(k, now, self._j_vec[k], self._j_vel[k])
            self._j_cmd[k] = hold.velocity[k] + self._hold_gain[k] * (hold.position[k] - self._j_vec[k]) \
                if by_velocity else hold.position[k]

    def on_activate(self) -> None:
        """OP, then every drive to OPERATION ENABLED (bounded by ``activate_timeout``)."""
        master, n = self.master, len(self.positions)
        deadline = time.monotonic() + self.options.activate_timeout
        self._controlword = [CW_DISABLE_VOLTAGE] * n
        if self._awaiting:
            self._receive()
        self._send(self._hold_targets())
        self._receive()
        master.state = OP
        master.write_state()
        while master.state_check(OP, 5_000) != OP:
            self._send(self._hold_targets())
            self._receive()
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: the line did not reach OP: {states_line(master, self.positions)}")
        while True:
            self._send(self._hold_targets())
            if self._receive() == self.expected_wkc and all(
                    int(sw) & SW_OPERATION_ENABLED_MASK == SW_OPERATION_ENABLED for sw in self.statusword):
                break
            if time.monotonic() > deadline:
                states = {self.positions[k]: state_of(int(self.statusword[k])) for k in range(n)}
                raise RuntimeError(f"{self.name}: drives did not reach OPERATION ENABLED (working counter "
                                   f"{self.last_wkc} of {self.expected_wkc}): {states}")
            self._controlword = [next_controlword(int(sw), cw) for sw, cw in zip(self.statusword, self._controlword)]
            time.sleep(0.001)
        self._controlword = [CW_ENABLE_OPERATION] * n
        self.hold.release()
        self._dc_start = None
        if self.follower is not None:
            self.follower.reset()
        self._quick_stop = False
        self._failed = 0
        self._send(self._hold_targets())

    # -- every cycle: never raises ----------------------------------------------------------------------------
    def read(self, state, now: float) -> bool:
        health = self.health
        fresh = False
        self.cycle_correction = 0.0
        if self._awaiting and self.master is not None:
            wkc = self._receive()
            if wkc == self.expected_wkc:
                self._failed = 0
                fresh = True
                self._check_drives()
                if self.options.distributed_clocks:
                    self._watch_reference_clock()
                self.emergencies.poll()
                if self.emergencies.count != health.extra["emergencies"]:
                    health.extra["emergencies"] = self.emergencies.count
            else:
                self._frame_failed(wkc)
        if not fresh:
            health.stale_cycles += 1
        health.reads += 1
        return self.publish_measurement(state, self.transmission, self._a_pos, self._a_vel, self._a_tau,
                                        self._j_vec, now, fresh)

    def _watch_reference_clock(self) -> None:
        """The reference clock's system time, read by the frame's FRMW, against this host's clock since the
        first frame of the run: ``dc_offset_ns``, their drift plus the frame's timing; with
        ``follow_reference_clock`` the loop's next deadline moved to hold the frame's phase in the SYNC0 interval
        (:mod:`.clock`), ``dc_phase_error_ns`` its error now."""
        dc, host = self.master.dc_time, time.monotonic_ns()
        if self._dc_start is None:
            self._dc_start = (dc, host)
        else:
            self.health.extra["dc_offset_ns"] = (dc - self._dc_start[0]) - (host - self._dc_start[1])
        if self.follower is not None and not self._quick_stop:
            self.cycle_correction = self.follower.update(dc)
            self.health.extra["dc_phase_error_ns"] = int(self.follower.phase_error_ns)

    def _check_drives(self) -> None:
        for k in range(len(self.positions)):
            sw = int(self.statusword[k])
            if sw & SW_OPERATION_ENABLED_MASK != SW_OPERATION_ENABLED and not self.health.fault:
                code = f", error code 0x{int(self.error_code[k]):04X}" if self.error_code[k] else ""
                why = " after the quick stop this driver requested" if self._quick_stop else ""
                line = self._diagnosis() if not self._quick_stop else ""
                emergency = self.emergencies.at_fault(k) if not self._quick_stop else ""
                code += f"; {emergency}" if emergency else ""
                self.health.set_fault(f"{self.name}: slave {self.positions[k]} (joint {self.joint_names[k]!r}) in "
                                      f"{state_of(sw)}{why} (statusword 0x{sw:04X}{code})"
                                      + (f"; {line}" if line and line != "every slave in OP" else ""))

    def _frame_failed(self, wkc: int) -> None:
        health, o = self.health, self.options
        self._failed += 1
        if wkc == NO_FRAME or wkc < 0:
            health.timeouts += 1
            health.extra["lost_frames"] += 1
        else:
            health.extra["wrong_wkc"] += 1
        if health.fault:
            return
        if self.link is not None and not self.link.up():
            health.set_fault(f"{self.name}: link down on {o.ethercat_interface!r} (no carrier): the EtherCAT line "
                             f"is cut at the master")
        elif self._failed >= o.max_failed_cycles:
            if wkc < 0:
                health.set_fault(f"{self.name}: no frame came back for {self._failed} cycles in a row (read_timeout "
                                 f"{o.read_timeout * 1e3:g} ms): the line is broken or its slaves are off")
            else:
                health.set_fault(f"{self.name}: working counter {wkc} instead of {self.expected_wkc} for "
                                 f"{self._failed} cycles in a row: {self._diagnosis()}")

    def _diagnosis(self) -> str:
        try:
            return states_line(self.master, self.positions)
        except Exception as exc:  # noqa: BLE001  (the diagnosis must not raise from read)
            return f"the slaves' states could not be read ({type(exc).__name__})"

    def write(self, command, now: float) -> None:
        if self.master is None:
            return
        if self._awaiting:                 # the last frame was never read: free its slot before the next
            self._receive()
        cmd = self._cmd
        if self._quick_stop:
            self._hold_targets()
        elif self.mode == EFFORT_MODE:
            np.take(command.effort, self.v_index, out=self._j_cmd)
            self._to_permille(self._j_cmd, cmd)
        else:
            self._targets(command, now)
            if self.options.torque_offset:
                np.take(command.effort, self.v_index, out=self._j_vec)
                for k in range(len(self.v_index)):
                    if self.hold.active[k]:
                        self._j_vec[k] = 0.0            # a held drive holds by its own loops
                self._to_permille(self._j_vec, self._offset)
            self.transmission.to_actuator_position(self._j_cmd, cmd)   # velocities map as positions do
            np.divide(cmd, self.rad_per_increment, out=cmd)
            np.round(cmd, out=cmd)
            np.clip(cmd, -2.0 ** 31, 2.0 ** 31 - 1, out=cmd)
        try:
            self._send(cmd)
        except Exception as exc:  # noqa: BLE001  (a closed or failing socket: a fault, never an exception)
            self.health.set_fault(f"{self.name}: sending the frame failed: {type(exc).__name__} {exc}")
        self.health.writes += 1

    def _to_permille(self, joint_effort, out) -> None:
        """This driver's joint efforts into ``out`` in per mille of each drive's rated torque, rounded and
        clipped to its max torque (a clipped cycle counted)."""
        self.transmission.to_actuator_effort(joint_effort, out)
        np.divide(out, self.nm_per_permille, out=out)
        np.round(out, out=out)
        if np.any(np.abs(out) > self.max_torque_permille):
            self.saturated_cycles += 1
            np.clip(out, -self.max_torque_permille, self.max_torque_permille, out=out)

    # -- stopping -------------------------------------------------------------------------------------------------
    def quick_stop(self) -> None:
        """The quick stop command (controlword 0x02) now and in every later frame: each drive stops as its quick
        stop option code 0x605A says; this driver reports its leaving OPERATION ENABLED as its fault."""
        self._quick_stop = True
        self._controlword = [CW_QUICK_STOP] * len(self.positions)
        if self.master is not None:
            if self._awaiting:
                self._receive()
            self._send(self._hold_targets())

    def safe_stop(self) -> None:
        try:
            self.quick_stop()
        except Exception:  # noqa: BLE001
            pass

    def on_deactivate(self) -> None:
        """Quick stop until every drive has left OPERATION ENABLED and QUICK STOP ACTIVE (or the timeout), disable
        voltage, SAFE-OP."""
        if self.master is None:
            return
        deadline = time.monotonic() + self.options.activate_timeout
        self.quick_stop()
        lost = 0
        while time.monotonic() < deadline and lost < self.options.max_failed_cycles:
            wkc = self._receive()
            lost = lost + 1 if wkc != self.expected_wkc else 0
            if wkc == self.expected_wkc and not any(
                    state_of(int(sw)) in ("OPERATION ENABLED", "QUICK STOP ACTIVE") for sw in self.statusword):
                break
            self._send(self._hold_targets())
            time.sleep(0.001)
        self._controlword = [CW_DISABLE_VOLTAGE] * len(self.positions)
        for _ in range(2):
            self._send(self._hold_targets())
            self._receive()
        self.master.state = SAFE_OP
        self.master.write_state()
        self.master.state_check(SAFE_OP, 50_000)

    def close(self) -> None:
        if self.link is not None:
            self.link.close()
            self.link = None
        if self.master is not None:
            try:
                self.master.close()
            finally:
                self.master = None
        self._awaiting = False

    def report_states(self) -> str:
        """Each slave's AL state and status code, read now (for a report, not the cycle)."""
        return states_line(self.master, self.positions) if self.master is not None else "not configured"


__all__ = ["EthercatDriver", "EthercatOptions", "al_status_name", "state_name"]
