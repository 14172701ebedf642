"""MIT-mode motor protocol (mini-cheetah / CubeMars AK-series "servo MIT mode") and the ``can_mit`` backend.

Wire format (classic CAN, 11-bit IDs, 1 Mbit/s on hardware):

* special frames to the motor's ID: ``FF FF FF FF FF FF FF FC`` enter motor
  mode, ``... FD`` exit motor mode, ``... FE`` set the current position as zero;
* a command, 8 bytes to the motor's ID, fields packed big-endian as unsigned
  integers mapped linearly onto each model's range: position 16 bit, velocity
  12, kp 12, kd 12, feed-forward torque 12::

      b0 b1 = p[15:0]     b2 = v[11:4]   b3 = v[3:0] kp[11:8]   b4 = kp[7:0]
      b5 = kd[11:4]       b6 = kd[3:0] t[11:8]                  b7 = t[7:0]

  The motor applies ``tau = kp (p - theta) + kd (v - omega) + t`` at its own
  current-loop rate, clamped to its torque range;
* its reply, 6 bytes to the host ID: ``b0`` the motor's ID, position 16 bit,
  velocity 12, torque 12 (``b1 b2 = p``, ``b3 = v[11:4]``,
  ``b4 = v[3:0] t[11:8]``, ``b5 = t[7:0]``).

Integer mapping as in the reference firmware: ``u = int((x - lo) * (2^bits - 1) / (hi - lo))``
after clamping ``x`` to ``[lo, hi]`` (truncation), and back ``x = lo + u (hi - lo) / (2^bits - 1)``.
All values are output-shaft quantities (the motor's own reduction is inside it).

Per-model ranges are data (:data:`MODELS`); add a model by adding a row.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import can
import numpy as np

from ..base import EFFORT_MODE, ActuatorDriver
from ..transmission import Transmission
from rtctl.options import setting

from .bus import CAN_COUNTERS, CanOptions, check_can_ids, check_channel, drain, open_bus, release_with, shutdown_bus

ENTER_MOTOR_MODE = bytes([0xFF] * 7 + [0xFC])
EXIT_MOTOR_MODE = bytes([0xFF] * 7 + [0xFD])
ZERO_POSITION = bytes([0xFF] * 7 + [0xFE])
REPLY_LENGTH = 6


@dataclass(frozen=True)
class MitModel:
    """The ranges a motor's firmware maps its integer fields onto (SI, output shaft)."""

    name: str
    p_min: float
    p_max: float
    v_min: float
    v_max: float
    kp_min: float
    kp_max: float
    kd_min: float
    kd_max: float
    t_min: float
    t_max: float

    def step(self, field: str) -> float:
        """One integer step of ``field`` ("p", "v", "kp", "kd", "t") in SI units."""
        lo, hi = getattr(self, f"{field}_min"), getattr(self, f"{field}_max")
        return (hi - lo) / ((1 << (16 if field == "p" else 12)) - 1)


# (name, p range rad, v range rad/s, kp range N m/rad, kd range N m s/rad, torque range N m)
_MODEL_ROWS = [
    ("mini-cheetah", 12.5, 65.0, 500.0, 5.0, 18.0),   # the mini-cheetah motor controller firmware's defaults
    ("AK80-9", 12.5, 25.64, 500.0, 5.0, 18.0),
    ("AK60-6", 12.5, 45.0, 500.0, 5.0, 15.0),
    ("AK10-9", 12.5, 50.0, 500.0, 5.0, 65.0),
]
MODELS: dict[str, MitModel] = {
    name: MitModel(name, -p, p, -v, v, 0.0, kp, 0.0, kd, -t, t) for name, p, v, kp, kd, t in _MODEL_ROWS
}


def get_model(name: str) -> MitModel:
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown MIT motor model {name!r}; known: {sorted(MODELS)}") from None


def float_to_uint(x: float, lo: float, hi: float, bits: int) -> int:
    if x != x:  # NaN never reaches the wire as anything but the range's low end
        x = lo
    x = lo if x < lo else hi if x > hi else x
    return int((x - lo) * ((1 << bits) - 1) / (hi - lo))


def uint_to_float(u: int, lo: float, hi: float, bits: int) -> float:
    return lo + u * (hi - lo) / ((1 << bits) - 1)


def pack_command(m: MitModel, p: float, v: float, kp: float, kd: float, t: float, out=None):
    """The 8 command bytes (into ``out``, a bytearray of 8, if given)."""
    pi = float_to_uint(p, m.p_min, m.p_max, 16)
    vi = float_to_uint(v, m.v_min, m.v_max, 12)
    kpi = float_to_uint(kp, m.kp_min, m.kp_max, 12)
    kdi = float_to_uint(kd, m.kd_min, m.kd_max, 12)
    ti = float_to_uint(t, m.t_min, m.t_max, 12)
    b = bytearray(8) if out is None else out
    b[0] = pi >> 8
    b[1] = pi & 0xFF
    b[2] = vi >> 4
    b[3] = ((vi & 0xF) << 4) | (kpi >> 8)
    b[4] = kpi & 0xFF
    b[5] = kdi >> 4
    b[6] = ((kdi & 0xF) << 4) | (ti >> 8)
    b[7] = ti & 0xFF
    return b


def unpack_command(m: MitModel, data) -> tuple[float, float, float, float, float]:
    """(p, v, kp, kd, t) from 8 command bytes (what the motor firmware does)."""
    pi = (data[0] << 8) | data[1]
    vi = (data[2] << 4) | (data[3] >> 4)
    kpi = ((data[3] & 0xF) << 8) | data[4]
    kdi = (data[5] << 4) | (data[6] >> 4)
    ti = ((data[6] & 0xF) << 8) | data[7]
    return (uint_to_float(pi, m.p_min, m.p_max, 16), uint_to_float(vi, m.v_min, m.v_max, 12),
            uint_to_float(kpi, m.kp_min, m.kp_max, 12), uint_to_float(kdi, m.kd_min, m.kd_max, 12),
            uint_to_float(ti, m.t_min, m.t_max, 12))


def pack_reply(m: MitModel, motor_id: int, p: float, v: float, t: float, out=None):
    """The 6 reply bytes a motor sends (the emulator's side)."""
    pi = float_to_uint(p, m.p_min, m.p_max, 16)
    vi = float_to_uint(v, m.v_min, m.v_max, 12)
    ti = float_to_uint(t, m.t_min, m.t_max, 12)
    b = bytearray(REPLY_LENGTH) if out is None else out
    b[0] = motor_id & 0xFF
    b[1] = pi >> 8
    b[2] = pi & 0xFF
    b[3] = vi >> 4
    b[4] = ((vi & 0xF) << 4) | (ti >> 8)
    b[5] = ti & 0xFF
    return b


def unpack_reply(m: MitModel, data) -> tuple[int, float, float, float]:
    """(motor id, position rad, velocity rad/s, torque N m) from a reply."""
    pi = (data[1] << 8) | data[2]
    vi = (data[3] << 4) | (data[4] >> 4)
    ti = ((data[4] & 0xF) << 8) | data[5]
    return (data[0], uint_to_float(pi, m.p_min, m.p_max, 16), uint_to_float(vi, m.v_min, m.v_max, 12),
            uint_to_float(ti, m.t_min, m.t_max, 12))


def is_special(data) -> int:
    """0 for a command frame, else the special code (0xFC enter, 0xFD exit, 0xFE zero)."""
    if len(data) == 8 and data[0] == 0xFF and data[1] == 0xFF and data[2] == 0xFF and data[3] == 0xFF \
            and data[4] == 0xFF and data[5] == 0xFF and data[6] == 0xFF and data[7] in (0xFC, 0xFD, 0xFE):
        return data[7]
    return 0


class MitDriver(ActuatorDriver):
    """Effort (or motor-side PD) commands to MIT-mode motors, one CAN ID per joint.

    Every ``write`` sends one command frame per motor; every ``read`` collects
    the replies to the previous write, waiting at most ``read_timeout``
    seconds in all. A motor whose reply is missing keeps its last sample and
    is counted (``timeouts``); ``max_failed_cycles`` consecutive misses of any motor,
    or ``max_bus_errors`` consecutive failed sends, latch a driver fault. A
    second reply from one motor in one read (a late one) is counted in
    ``extra["late_replies"]``; frames from unknown IDs in ``extra["unknown_ids"]``;
    error frames and failed sends in ``extra["bus_errors"]``. Once faulted the
    driver keeps sending the motor's own safe command: damping only
    (``kp = 0, kd = safe_kd, t = 0``), which the motor closes on its own encoder.
    """

    @dataclass(frozen=True)
    class Options(CanOptions):
        motor_model: str = setting("str", "AK80-9")

    def __init__(self, model, options: "MitDriver.Options | None" = None, *, bus: can.BusABC | None = None,
                 host_id: int = 0, transmission: Transmission | None = None, max_bus_errors: int = 5,
                 safe_kd: float = 0.5, bus_options: dict | None = None, activate_timeout: float = 1.0):
        super().__init__(model, options)
        options = self.options
        n = len(self.v_index)
        ids = check_can_ids(self.name, options.can_ids, n, high=0x7FF, what="11-bit IDs")
        check_channel(self.name, options.can_channel, bus)
        names = [options.motor_model] * n
        self.motors = [get_model(x) for x in names]
        self.transmission = transmission or Transmission(n)
        if self.transmission.n != n:
            raise ValueError(f"{self.name}: transmission is for {self.transmission.n} joints, driver has {n}")
        if self.mode != EFFORT_MODE and not self.transmission.is_diagonal:
            raise ValueError(f"{self.name}: position mode needs a diagonal transmission")
        if max_bus_errors < 1:
            raise ValueError(f"{self.name}: max_bus_errors must be >= 1, got {max_bus_errors}")
        self.can_ids = ids
        self.host_id = int(host_id)
        self.can_interface, self.can_channel = options.can_interface, options.can_channel
        self.bus_options = dict(bus_options or {})
        self.bus = bus
        self._own_bus = bus is None
        self._release = None        # shuts down the bus this driver opened (close(), collection or exit)
        self.read_timeout = options.read_timeout
        self.max_failed_cycles = options.max_failed_cycles
        self.max_bus_errors = int(max_bus_errors)
        self.safe_kd = float(safe_kd)
        self.activate_timeout = float(activate_timeout)
        self._slot = np.full(256, -1, dtype=np.int64)  # reply byte 0 (motor id) -> joint slot
        for k, i in enumerate(ids):
            self._slot[i & 0xFF] = k
        self._msgs = [can.Message(arbitration_id=i, data=bytearray(8), is_extended_id=False) for i in ids]
        self._a_pos, self._a_vel, self._a_tau = np.zeros(n), np.zeros(n), np.zeros(n)
        self._j_vec, self._j_tau, self._cmd = np.zeros(n), np.zeros(n), np.zeros(n)
        self._got = np.zeros(n, dtype=bool)
        self._missed = np.zeros(n, dtype=np.int64)
        self._have_sample = False
        self._awaiting = False
        self._send_errors = 0
        self.saturated_cycles = 0
        self.last_rtt = 0.0
        self._sent_at = 0.0
        self._reset_counters()

    def _reset_counters(self):
        for key in CAN_COUNTERS:
            self.health.extra[key] = 0
        self.health.extra["missed_by_motor"] = [0] * len(self.can_ids)

    # -- lifecycle ---------------------------------------------------------------
    def on_configure(self) -> None:
        if self.bus is None:
            self.bus = open_bus(self.can_interface, self.can_channel, **self.bus_options)
            self._own_bus = True
            self._release = release_with(self, shutdown_bus, self.bus)
        from ..base import DriverHealth
        self.health = DriverHealth()
        self._reset_counters()
        self._missed[:] = 0
        self._send_errors = 0
        drain(self.bus)

    def on_activate(self) -> None:
        """Enter motor mode on every motor and take the first sample from their replies (bounded wait)."""
        self._got[:] = False
        # A lost reply is retried every 20 ms (the enter frame is idempotent): the motors are limp until they
        # are in motor mode and commanded, so a long wait would let the robot sag.
        attempts = max(5, int(self.activate_timeout / 0.02))
        for _ in range(attempts):
            for k, msg in enumerate(self._msgs):
                if not self._got[k]:
                    msg.data[:] = ENTER_MOTOR_MODE
                    self.bus.send(msg)
            deadline = time.perf_counter() + self.activate_timeout / attempts
            while not self._got.all():
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    break
                msg = self.bus.recv(remaining)
                if msg is not None:
                    self._take(msg)
            if self._got.all():
                break
            self.health.retries += 1
        if not self._got.all():
            missing = [self.can_ids[k] for k in range(len(self.can_ids)) if not self._got[k]]
            raise TimeoutError(f"{self.name}: no reply to enter-motor-mode from IDs {missing} "
                               f"within {self.activate_timeout} s")
        self._have_sample = True
        self._awaiting = False

    def on_deactivate(self) -> None:
        self._send_all(0.0, zero=True)
        for msg in self._msgs:
            msg.data[:] = EXIT_MOTOR_MODE
            self._send(msg)
        time.sleep(0.005)
        drain(self.bus)

    def close(self) -> None:
        """Shut the bus down (if this driver opened it; done at exit too if nobody calls this)."""
        if self._release is not None:
            self._release()
            self._release = None
            self.bus = None

    def zero_position(self) -> None:
        """Make every motor's present position its zero. The firmware takes the zero command only outside
        motor mode (it is ignored there), so this refuses while the driver is active."""
        if self.active:
            raise RuntimeError(f"{self.name}: zero_position while active: the motors ignore the zero command in "
                               f"motor mode; deactivate first")
        if self.bus is None:
            raise RuntimeError(f"{self.name}: zero_position before configure (no bus)")
        for msg in self._msgs:
            msg.data[:] = ZERO_POSITION
            self._send(msg)

    # -- per cycle -----------------------------------------------------------------
    def _take(self, msg) -> None:
        extra = self.health.extra
        if msg.is_error_frame:
            extra["bus_errors"] += 1
            return
        data = msg.data
        if msg.arbitration_id != self.host_id or len(data) < REPLY_LENGTH:
            extra["unknown_ids"] += 1
            return
        k = self._slot[data[0]]
        if k < 0:
            extra["unknown_ids"] += 1
            return
        m = self.motors[k]
        pi = (data[1] << 8) | data[2]
        vi = (data[3] << 4) | (data[4] >> 4)
        ti = ((data[4] & 0xF) << 8) | data[5]
        self._a_pos[k] = m.p_min + pi * (m.p_max - m.p_min) / 65535.0
        self._a_vel[k] = m.v_min + vi * (m.v_max - m.v_min) / 4095.0
        self._a_tau[k] = m.t_min + ti * (m.t_max - m.t_min) / 4095.0
        if self._got[k]:
            extra["late_replies"] += 1
        self._got[k] = True

    def read(self, state, now: float) -> bool:
        got = self._got
        got[:] = False
        bus = self.bus
        clock = time.perf_counter
        deadline = clock() + self.read_timeout
        n = len(self.can_ids)
        received = 0
        try:
            while True:
                msg = bus.recv(0.0)
                if msg is None:
                    if not self._awaiting or received >= n and got.all():
                        break
                    remaining = deadline - clock()
                    if remaining <= 0:
                        break
                    msg = bus.recv(remaining)
                    if msg is None:
                        break
                self._take(msg)
                received += 1
                if self._awaiting and got.all():
                    self.last_rtt = clock() - self._sent_at
                    break
        except Exception as exc:  # noqa: BLE001  (a transport failure is counted, never raised)
            self.health.extra["bus_errors"] += 1
            self.health.set_fault(f"{self.name}: receive failed: {type(exc).__name__}: {exc}")
        health = self.health
        fresh = False
        if self._awaiting:
            for k in range(n):
                if got[k]:
                    self._missed[k] = 0
                    fresh = True
                else:
                    self._missed[k] += 1
                    health.timeouts += 1
                    health.extra["missed_by_motor"][k] += 1
                    if self._missed[k] >= self.max_failed_cycles:
                        health.set_fault(f"{self.name}: motor ID {self.can_ids[k]} missed "
                                         f"{self._missed[k]} consecutive replies")
            if not got.all():
                health.stale_cycles += 1
            self._awaiting = False
        health.reads += 1
        return self.publish_measurement(state, self.transmission, self._a_pos, self._a_vel, self._a_tau,
                                        self._j_vec, now, fresh)

    def _send(self, msg) -> bool:
        try:
            self.bus.send(msg, timeout=self.read_timeout)
            self._send_errors = 0
            return True
        except Exception:  # noqa: BLE001  (can.CanError, a closed socket ...)
            self._send_errors += 1
            self.health.extra["bus_errors"] += 1
            self.health.extra["dropped_sends"] += 1
            if self._send_errors >= self.max_bus_errors:
                self.health.set_fault(f"{self.name}: {self._send_errors} consecutive failed sends")
            return False

    def _send_all(self, kd: float, zero: bool = False) -> None:
        for k, msg in enumerate(self._msgs):
            pack_command(self.motors[k], 0.0, 0.0, 0.0, kd, 0.0, msg.data)
            self._send(msg)

    def write(self, command, now: float) -> None:
        n = len(self.can_ids)
        if self.health.fault:
            self._send_all(self.safe_kd)
        else:
            np.take(command.effort, self.v_index, out=self._j_tau)
            self.transmission.to_actuator_effort(self._j_tau, self._cmd)
            saturated = False
            position = self.mode != EFFORT_MODE
            diag = np.diag(self.transmission.matrix) if position else None
            for k in range(n):
                m = self.motors[k]
                t = self._cmd[k]
                if t > m.t_max or t < m.t_min:
                    saturated = True
                if position:
                    iv, r = self.v_index[k], diag[k]
                    pack_command(m, r * command.position[iv], r * command.velocity[iv],
                                 command.stiffness[iv] / (r * r), command.damping[iv] / (r * r), t, self._msgs[k].data)
                else:
                    pack_command(m, 0.0, 0.0, 0.0, 0.0, t, self._msgs[k].data)
            if saturated:
                self.saturated_cycles += 1
            self._sent_at = time.perf_counter()
            for msg in self._msgs:
                self._send(msg)
        self._awaiting = True
        self.health.writes += 1

    def safe_stop(self) -> None:
        try:
            self._send_all(0.0, zero=True)
        except Exception:  # noqa: BLE001
            pass
