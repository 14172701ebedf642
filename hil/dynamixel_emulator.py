"""An emulated chain of Dynamixel X-series servos on a pseudo-terminal, driving a simulated plant.

Run as its own process from the repository root::

    rtctl-hil dynamixel-emulator [--robot dxl_arm2] [--drop-rate 0.1] [--corrupt-rate 0.02] ...

It opens a pty (``os.openpty()``), prints ``PORT /dev/pts/N`` on stdout once
it is ready (then ``TORQUE time id on|off`` as a servo's torque changes), and answers
Protocol 2.0 instruction packets on the master side for servos ``--ids`` (default 1..n,
one per actuated joint, the servo horn being the joint). On SIGTERM, SIGHUP or SIGINT it
prints one ``STATS {json}`` line
(packets handled, replies sent, dropped, corrupted, delayed) and exits.

Firmware (per servo, the X-series control table of :mod:`drivers.dynamixel.control_table` as a byte array):
:mod:`hil.dynamixel_firmware` -- status packet errors, every Protocol 2.0 instruction, Status Return Level,
Return Delay Time, ID and baud rate changes, Bus Watchdog, Hardware Error Status and Shutdown, as the
ROBOTIS e-manual specifies them. Physics of the servo, here:

* Current control (operating mode 0): ``tau = Kt * clamp(goal_current)``; PWM control (16): duty = Goal PWM.
* Position control (3/4/5): the servo PID on counts (``KPP = P/128``,
  ``KPI = I/65536``, ``KPD = D/16``) produces a PWM duty (limit 885) that
  drives a DC motor model, ``tau = stall_torque * (duty - omega / omega_no_load)``
  clamped at the current limit -- so the servo's back-EMF damping is there too.
  Velocity control (1): duty = goal / no-load speed + velocity P term (a simple model).
* Torque disabled: no torque, and the joint is held where it is (the gear train's static friction;
  the 353.5:1 XM430-W350 does not back-drive under the HIL arm's gravity load).
* Measured state is quantised like the servo: position in counts, velocity in
  0.229 rpm units, current in 2.69 mA units.

The plant (:func:`plants.create_plant` ``"rigid_body"``, or with ``--mjcf FILE`` MuJoCo's simulation of
that file, the mujoco extra) advances in soft real
time in fixed steps up to the wall clock whenever a packet arrives (and at
least every 5 ms while idle); if the process falls more than 50 ms behind, the
backlog is skipped and counted (``lag_skips``). Each wake-up steps the plant for at most
:data:`ADVANCE_SLICE` of wall time: a plant that cannot keep real time (a ``--dt`` far below what a step
costs, e.g. ``--dt 1e-9``, a large MuJoCo model, a loaded machine) runs slower than real time, counted in
``lag_skips``, but the emulator still answers packets, stops on a signal within a slice and a poll, and
leaves the CPU to others while it waits for packets (a slice per 5 ms wait when idle: 0.19 of a core measured
at ``--dt 1e-9``, 0.06 at the default, on 2 cores at load 7).

Fault injection: ``--drop-rate p`` (each status packet lost with probability
p), ``--corrupt-rate p`` (CRC byte flipped), ``--delay-sync-read N --delay-ms D``
(the replies to the N-th SYNC_READ are sent D ms late, without stalling the
emulator), all from a seeded RNG; ``--late-read N`` (the status packet of the N-th READ goes out once more
just before the reply to the next instruction packet: a late reply, as to a READ that timed out and was re-sent); ``--inject-error ID:KIND:SECONDS`` latches a hardware error
(overload, overheating, input_voltage, electrical_shock, encoder) that long after the first packet.
``--supply-voltage`` and ``--temperature`` set what the servos measure. The port's bit rate (as the
master set it on the pty) is compared with each servo's Baud Rate item: a servo at another rate hears
nothing. The servos start at the factory 57600 bps, or at ``--baudrate`` (as if set on the bench before).
STATS also lists each Bus Watchdog expiry (``watchdog``: id, timeout, last packet and expiry times) and each change of a servo's torque (``torque``: time, id, "torque on" / "torque off"), times on the
``time.perf_counter`` clock, which is system-wide (CLOCK_MONOTONIC on Linux, as ``time.monotonic``).
"""
from __future__ import annotations

import argparse
import array
import fcntl
import json
import os
import select
import sys
import termios
import time
import tty

import numpy as np


from rtctl.drivers.dynamixel import protocol as P
from rtctl.drivers.dynamixel.control_table import (
    BAUD_RATES,
    CURRENT_CONTROL,
    PWM_CONTROL,
    VELOCITY_CONTROL,
    ServoModel,
)
from rtctl.options import Parser
from rtctl.options import argument_type
from rtctl.rt.signals import on_stop_signals
from rtctl.hil.dynamixel_firmware import READ_ONLY, Firmware, Servo, parse_injection  # noqa: F401  (re-exported)
from .emulator_child import EmulatorChild

DEFAULT_ROBOT = "dxl_arm2"   # as a run config names it: [robot] model = "dxl_arm2"
ADVANCE_SLICE = 2e-3     # s of wall time a wake-up may spend stepping the plant before it serves the port again
BAUD_OF_SPEED = {getattr(termios, f"B{b}"): b for b in (9600, 57600, 115200, 1000000, 2000000, 3000000, 4000000)
                 if hasattr(termios, f"B{b}")}


def hil_arm(n: int = 2):
    """The HIL robot: an n-link planar arm in a vertical plane (servo-sized links, 4.1 N m joints)."""
    from rtctl.model import ModelBuilder
    b = ModelBuilder(f"dxl_arm{n}")
    parent = -1
    lengths = [0.20, 0.15, 0.10][:n]
    masses = [0.30, 0.20, 0.12][:n]
    for k in range(n):
        length, mass = lengths[k], masses[k]
        inertia = np.diag([mass * length ** 2 / 12, mass * length ** 2 / 12, 1e-5]) + np.eye(3) * 1e-5
        parent = b.add_body(f"link{k + 1}", parent, "revolute", joint_name=f"joint{k + 1}", axis=(0, 1, 0),
                            translation=(0, 0, 0) if k == 0 else (0, 0, -lengths[k - 1]),
                            mass=mass, com=(0, 0, -length / 2), inertia=inertia,
                            lower=-2.6, upper=2.6, velocity_limit=4.8, effort_limit=4.1)
    return b.build()


def dxl_arm2():
    """The Dynamixel emulator's default robot, ``[robot] model = "dxl_arm2"`` in a run config."""
    return hil_arm(2)


def dxl_arm3():
    """The three-servo HIL arm, ``[robot] model = "dxl_arm3"``."""
    return hil_arm(3)


def load_robot(robot: str | None, urdf: str | None):
    """The emulated robot: ``urdf``, or ``robot`` named as a run config's ``[robot] model`` names it (a robot
    model such as ``dxl_arm2``, or a bundled URDF such as ``arm7``)."""
    from rtctl.cli import load_model
    return load_model(urdf or robot or "dxl_arm2", None)


class ServoChain(Firmware):
    """The firmware of all servos (:class:`hil.dynamixel_firmware.Firmware`) plus the plant they drive."""

    def __init__(self, model, ids=None, servo_model: str = "XM430-W350", viscous_friction: float = 0.02,
                 initial=None, dt: float = 5e-4, drop_rate: float = 0.0, corrupt_rate: float = 0.0,
                 delay_sync_read: int = 0, delay_ms: float = 0.0, seed: int = 0, inject=(), late_read: int = 0,
                 supply_voltage: float = 12.0, temperature: float = 30.0, plant=None, baudrate: int = 57600):
        """``plant``: the simulation the servos drive (default: the rigid-body plant of ``model`` with
        ``viscous_friction``), e.g. a :class:`~rtctl.plants.mujoco.plant.MujocoPlant`; ``model`` is then its own.
        ``baudrate``: every servo's Baud Rate (CT 8) at power-on, as set on the bench before (factory: 57600)."""
        from rtctl.plants import create_plant

        from rtctl.rt.interfaces import actuated_indices
        self.model = model
        q_idx, v_idx, _ = actuated_indices(model)
        self.q_index, self.v_index = q_idx, v_idx
        n = len(v_idx)
        ids = list(range(1, n + 1)) if ids is None else list(ids)
        if len(ids) != n:
            raise ValueError(f"{len(ids)} servo ids for {n} actuated joints")
        spec = ServoModel(servo_model)
        code = {rate: value for value, rate in BAUD_RATES.items()}.get(baudrate)
        if code is None:
            raise ValueError(f"baud rate {baudrate} is none of the X-series' {sorted(BAUD_RATES.values())}")
        super().__init__([Servo(i, spec) for i in ids], drop_rate=drop_rate, corrupt_rate=corrupt_rate,
                         delay_sync_read=delay_sync_read, delay_ms=delay_ms, seed=seed, inject=inject,
                         late_read=late_read)
        for s in self.servos:
            s.set("baud_rate", code)
        self.supply_units, self.temperature = int(round(supply_voltage * 10)), int(round(temperature))
        self.plant = plant if plant is not None else create_plant("rigid_body", model, integrator="rk4",
                                                                  viscous_friction=viscous_friction)
        q0 = model.neutral_configuration()
        if initial is not None:
            q0[q_idx] = initial
        self.plant.reset(q0)
        self.held = q0[q_idx].astype(float)
        self.effort = np.zeros(model.nv)
        self.dt = dt
        self.sim_t = 0.0
        self.t0 = None
        self._update_registers()
        for s in self.servos:
            s.set("goal_position", s.get("present_position"))

    # -- physics -----------------------------------------------------------------
    def _duty(self, s: Servo, mode: int, counts: float, omega: float) -> float:
        """Position/velocity/PWM control: the PWM duty (-1..1) before the PWM limit, in 885ths."""
        spec = s.spec
        if mode == PWM_CONTROL:
            return 0.0 if s.stopped else float(s.get("goal_pwm"))
        if mode == VELOCITY_CONTROL:
            goal = 0 if s.stopped else s.get("goal_velocity")
            return 885.0 * goal * spec.rad_s_per_unit / spec.no_load_speed + \
                s.get("velocity_p_gain") / 128.0 * (goal - omega / spec.rad_s_per_unit)
        err = (s.hold if s.stopped else s.get("goal_position")) - counts
        s.integral += err * self.dt
        return (s.get("position_p_gain") / 128.0 * err
                + s.get("position_i_gain") / 65536.0 * s.integral * 1000.0
                - s.get("position_d_gain") / 16.0 * omega / spec.rad_per_count * 1e-3)

    def _servo_torque(self, s: Servo, theta: float, omega: float) -> tuple[float, bool]:
        """(output torque, saturated) of one servo with torque on."""
        spec = s.spec
        mode, limit = s.get("operating_mode"), s.get("current_limit")
        amp_torque = spec.amp_per_unit * spec.torque_constant
        if mode == CURRENT_CONTROL:
            goal = 0 if s.stopped else s.get("goal_current")
            return max(-limit, min(limit, goal)) * amp_torque, abs(goal) >= limit > 0
        counts = theta / spec.rad_per_count + spec.position_center + s.position_offset
        duty = self._duty(s, mode, counts, omega)
        pwm_limit = s.get("pwm_limit")
        saturated = abs(duty) >= pwm_limit
        tau = spec.stall_torque * (max(-pwm_limit, min(pwm_limit, duty)) / 885.0 - omega / spec.no_load_speed)
        tau_max = limit * amp_torque
        return max(-tau_max, min(tau_max, tau)), saturated or abs(tau) >= tau_max

    def _torques(self, now: float | None = None) -> None:
        plant = self.plant
        for k, s in enumerate(self.servos):
            tau, saturated = 0.0, False
            if s.torque_on():
                tau, saturated = self._servo_torque(s, plant.q[self.q_index[k]], plant.v[self.v_index[k]])
            if not saturated:
                s.saturated_since = None
            elif s.saturated_since is None and now is not None:
                s.saturated_since = now
            self.effort[self.v_index[k]] = tau

    def _update_registers(self) -> None:
        plant = self.plant
        for k, s in enumerate(self.servos):
            spec = s.spec
            tau = self.effort[self.v_index[k]]
            velocity = int(round(plant.v[self.v_index[k]] / spec.rad_s_per_unit))
            s.set("present_position", int(round(plant.q[self.q_index[k]] / spec.rad_per_count))
                  + spec.position_center + s.position_offset)
            s.set("present_velocity", velocity)
            s.set("present_current", int(round(tau / spec.torque_constant / spec.amp_per_unit)))
            s.set("realtime_tick", int(self.sim_t * 1000) % 32768)
            s.set("moving", int(abs(velocity) > s.get("moving_threshold")))
            s.set("present_input_voltage", self.supply_units)
            s.set("present_temperature", self.temperature)

    def advance(self, now: float) -> None:
        if self.t0 is None:
            self.t0 = now
        target = now - self.t0
        if target - self.sim_t > 0.05:
            self.t0 += target - self.sim_t - self.dt
            target = now - self.t0
            self.stats["lag_skips"] += 1
        stepped = False
        clock, give_up = time.perf_counter, time.perf_counter() + ADVANCE_SLICE
        while self.sim_t + self.dt <= target and clock() < give_up:
            self._torques(now)
            self.plant.step(self.dt, self.effort)
            held = False
            for k, s in enumerate(self.servos):
                if not s.torque_on():       # torque off: the 353:1 gear train holds the joint
                    self.plant.q[self.q_index[k]] = self.held[k]
                    self.plant.v[self.v_index[k]] = 0.0
                    held = True
                else:
                    self.held[k] = self.plant.q[self.q_index[k]]
            if held:                        # a plant that keeps its own state (MuJoCo) takes the held joints
                self.plant.reset(self.plant.q.copy(), self.plant.v.copy())
            self.sim_t += self.dt
            self.stats["steps"] += 1
            stepped = True
        if stepped:
            self._update_registers()
        self.tick(now)


def line_baud(fd: int):
    """The bit rate the master set on the pty: a termios speed, or one set as BOTHER (pyserial's way for
    4.5 Mbps), read back by Linux's TCGETS2 (``struct termios2``: c_ospeed after the flags, c_line and c_cc);
    0 for a rate this cannot read (no servo hears it), None if the pty's settings cannot be read."""
    try:
        speed = termios.tcgetattr(fd)[5]
        if speed in BAUD_OF_SPEED:
            return BAUD_OF_SPEED[speed]
        from serial import serialposix
        if speed == getattr(serialposix, "BOTHER", None):
            buf = array.array("i", [0] * 64)
            fcntl.ioctl(fd, serialposix.TCGETS2, buf)
            return int(buf[10])
        return 0
    except (termios.error, OSError):
        return None


def serve(chain: ServoChain, master: int, stop, slave: int | None = None, say=None) -> None:
    """Answer the master on ``master`` until ``stop()``; ``say(line)`` gets a ``TORQUE time id on|off`` line as
    each servo's torque changes (times on ``time.perf_counter``)."""
    decoder = P.StreamDecoder(keep_corrupt=True)
    clock = time.perf_counter
    said = 0
    while not stop():
        if say is not None:
            for t, dxl_id, what in chain.torque_events[said:]:
                say(f"TORQUE {t:.6f} {dxl_id} {what.split()[-1]}")
            said = len(chain.torque_events)
        now = clock()
        timeout = 0.005
        if chain.pending:
            timeout = max(0.0, min(timeout, min(t for t, _ in chain.pending) - now))
        try:
            ready = select.select((master,), (), (), timeout)[0]
        except InterruptedError:
            continue
        now = clock()
        chain.advance(now)
        if ready:
            try:
                data = os.read(master, 4096)
            except OSError:       # no slave open right now (EIO): wait for the next client
                time.sleep(0.002)
                continue
            if slave is not None:
                chain.line_baud = line_baud(slave)
            decoder.feed(data)
            while (pkt := decoder.pop()) is not None:
                chain.handle(pkt, clock())
            for pkt in decoder.corrupt_packets:
                chain.crc_error(pkt, clock())
            decoder.corrupt_packets.clear()
        if chain.pending:
            for data in chain.due(clock()):
                try:
                    os.write(master, data)
                except OSError:
                    pass


def _comma_separated(kind):
    """An argparse ``type``: ``"1,2,3"`` -> ``[kind(1), kind(2), kind(3)]``."""
    def parse(text: str) -> list:
        try:
            return [kind(x) for x in text.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {'integers' if kind is int else 'numbers'}, "
                                             f"got {text!r}") from None
    return parse


def _injection(text: str):
    try:
        return parse_injection(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv=None) -> int:
    prog = "rtctl-hil dynamixel-emulator"
    ap = Parser(prog=prog, description=__doc__.split("\n")[0])
    ap.add_argument("--robot", default=DEFAULT_ROBOT,
                    help="a robot as [robot] model names it: dxl_arm2 (default) / dxl_arm3, the HIL arms, or a "
                         "bundled model")
    ap.add_argument("--urdf", default=None, help="URDF file of the robot (instead of --robot)")
    ap.add_argument("--mjcf", default=None,
                    help="simulate this MJCF (or URDF) file in MuJoCo (rtctl[mujoco]) instead of rtctl's plant")
    ap.add_argument("--ids", type=_comma_separated(int), default=None, help="comma-separated servo ids (default 1..n)")
    ap.add_argument("--servo-model", default="XM430-W350")
    ap.add_argument("--baudrate", type=int, default=57600, choices=sorted(BAUD_RATES.values()), metavar="BPS",
                    help="every servo's Baud Rate (address 8) at power-on, the master's rate to match "
                         "(default 57600, the factory setting)")
    ap.add_argument("--initial", type=_comma_separated(float), default=None,
                    help="comma-separated initial joint positions (rad)")
    ap.add_argument("--viscous-friction", type=argument_type("float", low=0.0), default=None,
                    help="N m s/rad of rtctl's plant (default 0.02; an MJCF's joints carry their own damping)")
    ap.add_argument("--dt", type=argument_type("float", positive=True), default=5e-4, help="plant step (s)")
    ap.add_argument("--drop-rate", type=argument_type("float", low=0.0, high=1.0), default=0.0)
    ap.add_argument("--corrupt-rate", type=argument_type("float", low=0.0, high=1.0), default=0.0)
    ap.add_argument("--delay-sync-read", type=int, default=0, help="1-based SYNC_READ whose replies are late")
    ap.add_argument("--delay-ms", type=argument_type("float", low=0.0), default=0.0)
    ap.add_argument("--late-read", type=argument_type("int", low=0), default=0,
                    help="1-based READ whose status packet is sent again before the next instruction's reply")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--inject-error", type=_injection, action="append", default=[], metavar="ID:KIND:SECONDS",
                    help="latch a hardware error (overload, overheating, input_voltage, electrical_shock, encoder)")
    ap.add_argument("--supply-voltage", type=argument_type("float", low=0.0, high=6553.5), default=12.0,
                    help="V, what Present Input Voltage reads (2 bytes of 0.1 V)")
    ap.add_argument("--temperature", type=argument_type("float", low=0.0, high=255.0), default=30.0,
                    help="deg C, what Present Temperature reads (1 byte of 1 deg C)")
    args = ap.parse_args(argv)
    if args.mjcf and (args.urdf or args.viscous_friction is not None):
        ap.error("--mjcf simulates the file's own robot, joints and damping: give it without --urdf and "
                 "--viscous-friction")
    try:
        plant = None
        if args.mjcf:
            from rtctl.plants.mujoco.plant import MujocoPlant
            plant = MujocoPlant(source=args.mjcf)
            model = plant.model
        else:
            model = load_robot(args.robot, args.urdf)
        friction = 0.02 if args.viscous_friction is None else args.viscous_friction
        chain = ServoChain(model, ids=args.ids, servo_model=args.servo_model, viscous_friction=friction,
                           initial=args.initial, dt=args.dt, drop_rate=args.drop_rate, corrupt_rate=args.corrupt_rate,
                           delay_sync_read=args.delay_sync_read, delay_ms=args.delay_ms, seed=args.seed,
                           late_read=args.late_read, inject=args.inject_error, supply_voltage=args.supply_voltage, temperature=args.temperature,
                           plant=plant, baudrate=args.baudrate)
        chain._torques()
        chain.plant.step(1e-6, chain.effort)    # load the compiled plant kernel before announcing the port
    except Exception as exc:  # noqa: BLE001  (a bad robot, URDF or servo setting: one line, as can-emulator says it)
        ap.exit(1, f"{prog}: error: {type(exc).__name__}: {' '.join(str(exc).split())}\n")
    chain.plant.reset(chain.plant.q.copy(), np.zeros(model.nv))
    master, slave = os.openpty()
    tty.setraw(master)
    tty.setraw(slave)
    stopping = []
    on_stop_signals(lambda *a: stopping.append(1))
    print(f"PORT {os.ttyname(slave)}", flush=True)
    try:
        serve(chain, master, lambda: bool(stopping), slave, say=lambda line: print(line, flush=True))
    finally:
        print("STATS " + json.dumps(dict(chain.stats, watchdog=chain.watchdog_events, torque=chain.torque_events)),
              flush=True)
    return 0


class EmulatorProcess(EmulatorChild):
    """``python -m rtctl.hil.dynamixel_emulator ARGS``: its pty is :attr:`port`."""

    module, what, startup_timeout = "rtctl.hil.dynamixel_emulator", "the dynamixel emulator", 120.0

    def __init__(self, *args: str, **keywords):
        super().__init__(*args, **keywords)
        self.port = self.announced[0]


if __name__ == "__main__":
    sys.exit(main())
