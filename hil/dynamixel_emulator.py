"""An emulated chain of Dynamixel X-series servos on a pseudo-terminal, driving a simulated plant.

Run as its own process from the repository root::

    python -m hil.dynamixel_emulator --robot arm2 [--drop-rate 0.1] [--corrupt-rate 0.02] ...

It opens a pty (``os.openpty()``), prints ``PORT /dev/pts/N`` on stdout once
it is ready, and answers Protocol 2.0 instruction packets on the master side
for servos ``--ids`` (default 1..n, one per actuated joint, the servo horn
being the joint). On SIGTERM or SIGINT it prints one ``STATS {json}`` line
(packets handled, replies sent, dropped, corrupted, delayed) and exits.

Firmware model (per servo, the X-series control table of
:mod:`drivers.dynamixel.control_table` as a byte array):

* PING, READ, WRITE, SYNC_READ, SYNC_WRITE, BULK_READ, BULK_WRITE, broadcast
  PING; status packets with the error byte (instruction, data range, data
  length and access errors: EEPROM writes with torque on, writes to read-only
  fields); the return delay time (2 us units) is honoured.
* Current control (operating mode 0): ``tau = Kt * clamp(goal_current)``.
* Position control (3/4/5): the servo PID on counts (``KPP = P/128``,
  ``KPI = I/65536``, ``KPD = D/16``) produces a PWM duty (limit 885) that
  drives a DC motor model, ``tau = stall_torque * (duty - omega / omega_no_load)``
  clamped at the current limit -- so the servo's back-EMF damping is there too.
* Torque disabled: no torque, and the joint is held where it is (the gear train's static friction;
  the 353.5:1 XM430-W350 does not back-drive under the HIL arm's gravity load).
* Measured state is quantised like the servo: position in counts, velocity in
  0.229 rpm units, current in 2.69 mA units.

The plant (:func:`plants.create_plant` ``"rigid_body"``) advances in soft real
time in fixed steps up to the wall clock whenever a packet arrives (and at
least every 5 ms while idle); if the process falls more than 50 ms behind, the
backlog is skipped and counted (``lag_skips``).

Fault injection: ``--drop-rate p`` (each status packet lost with probability
p), ``--corrupt-rate p`` (CRC byte flipped), ``--delay-sync-read N --delay-ms D``
(the replies to the N-th SYNC_READ are sent D ms late, without stalling the
emulator), all from a seeded RNG.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import select
import signal
import subprocess
import sys
import time
import tty
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rtctl.drivers.dynamixel import protocol as P  # noqa: E402
from rtctl.drivers.dynamixel.control_table import (CURRENT_CONTROL, EEPROM, ServoModel)  # noqa: E402

READ_ONLY = {"model_number", "model_information", "firmware_version", "registered_instruction",
             "hardware_error_status", "realtime_tick", "moving", "moving_status", "present_pwm",
             "present_current", "present_velocity", "present_position", "velocity_trajectory",
             "position_trajectory", "present_input_voltage", "present_temperature"}


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


def load_robot(robot: str | None, urdf: str | None):
    if urdf:
        from rtctl.model.urdf import load_urdf
        return load_urdf(urdf)
    robot = robot or "arm2"
    if robot.startswith("arm") and robot[3:].isdigit() and robot not in ("arm7",):
        return hil_arm(int(robot[3:]))
    from rtctl import bundled_model_path
    from rtctl.model.urdf import load_urdf
    return load_urdf(bundled_model_path(robot))


class Servo:
    def __init__(self, dxl_id: int, spec: ServoModel):
        self.id = dxl_id
        self.spec = spec
        self.mem = bytearray(spec.table_size)
        for f in spec.fields.values():
            if f.default is not None:
                self.mem[f.address:f.address + f.size] = P.to_bytes(int(f.default), f.size)
        self.set("id", dxl_id)
        self.integral = 0.0

    def get(self, name: str) -> int:
        f = self.spec[name]
        return P.from_bytes(self.mem[f.address:f.address + f.size], f.signed)

    def set(self, name: str, value: int) -> None:
        f = self.spec[name]
        self.mem[f.address:f.address + f.size] = P.to_bytes(int(value), f.size)

    def check_write(self, address: int, length: int) -> int:
        """Error code for a write of ``length`` bytes at ``address`` (0 if allowed)."""
        if address + length > len(self.mem) or length < 1:
            return P.ERROR_DATA_RANGE
        torque_on = self.mem[self.spec["torque_enable"].address] != 0
        for f in self.spec.fields.values():
            if f.address < address + length and address < f.address + f.size:
                if f.name in READ_ONLY:
                    return P.ERROR_ACCESS
                if f.area == EEPROM and torque_on:
                    return P.ERROR_ACCESS
        return 0

    def write(self, address: int, data) -> int:
        err = self.check_write(address, len(data))
        if err:
            return err
        self.mem[address:address + len(data)] = data
        if address <= self.spec["goal_position"].address < address + len(data) or \
                address <= self.spec["torque_enable"].address < address + len(data):
            self.integral = 0.0
        return 0

    def read(self, address: int, length: int):
        if address + length > len(self.mem) or length < 1:
            return P.ERROR_DATA_RANGE, b""
        return 0, bytes(self.mem[address:address + length])


class ServoChain:
    """The firmware of all servos plus the plant they drive."""

    def __init__(self, model, ids=None, servo_model: str = "XM430-W350", viscous_friction: float = 0.02,
                 initial=None, dt: float = 5e-4, drop_rate: float = 0.0, corrupt_rate: float = 0.0,
                 delay_sync_read: int = 0, delay_ms: float = 0.0, seed: int = 0):
        from rtctl.plants import create_plant
        from rtctl.rt.interfaces import actuated_indices
        self.model = model
        q_idx, v_idx, _ = actuated_indices(model)
        self.q_index, self.v_index = q_idx, v_idx
        n = len(v_idx)
        ids = list(range(1, n + 1)) if ids is None else list(ids)
        if len(ids) != n:
            raise SystemExit(f"dynamixel_emulator: {len(ids)} ids for {n} actuated joints")
        spec = ServoModel(servo_model)
        self.servos = [Servo(i, spec) for i in ids]
        self.by_id = {s.id: s for s in self.servos}
        self.plant = create_plant("rigid_body", model, viscous_friction=viscous_friction)
        q0 = model.neutral_configuration()
        if initial is not None:
            q0[q_idx] = initial
        self.plant.reset(q0)
        self.held = q0[q_idx].astype(float)
        self.effort = np.zeros(model.nv)
        self.dt = dt
        self.sim_t = 0.0
        self.t0 = None
        self.rng = random.Random(seed)
        self.drop_rate, self.corrupt_rate = drop_rate, corrupt_rate
        self.delay_sync_read, self.delay_s = delay_sync_read, delay_ms * 1e-3
        self.stats = dict(packets=0, replies=0, dropped=0, corrupted=0, delayed=0, sync_reads=0, sync_writes=0,
                          bad_instruction=0, steps=0, lag_skips=0, crc_errors_in=0)
        self.pending: list[tuple[float, bytes]] = []
        self._update_registers()

    # -- physics -----------------------------------------------------------------
    def _torques(self) -> None:
        plant = self.plant
        for k, s in enumerate(self.servos):
            spec = s.spec
            theta = plant.q[self.q_index[k]]
            omega = plant.v[self.v_index[k]]
            tau = 0.0
            if s.mem[64]:
                mode = s.get("operating_mode")
                limit = s.get("current_limit")
                if mode == CURRENT_CONTROL:
                    cur = max(-limit, min(limit, s.get("goal_current")))
                    tau = cur * spec.amp_per_unit * spec.torque_constant
                elif mode in (3, 4, 5):
                    counts = theta / spec.rad_per_count + spec.position_center
                    err = s.get("goal_position") - counts
                    s.integral += err * self.dt
                    duty = (s.get("position_p_gain") / 128.0 * err
                            + s.get("position_i_gain") / 65536.0 * s.integral * 1000.0
                            - s.get("position_d_gain") / 16.0 * omega / spec.rad_per_count * 1e-3)
                    pwm_limit = s.get("pwm_limit")
                    duty = max(-pwm_limit, min(pwm_limit, duty)) / 885.0
                    tau = spec.stall_torque * (duty - omega / spec.no_load_speed)
                    tau_max = limit * spec.amp_per_unit * spec.torque_constant
                    tau = max(-tau_max, min(tau_max, tau))
            self.effort[self.v_index[k]] = tau

    def _update_registers(self) -> None:
        plant = self.plant
        for k, s in enumerate(self.servos):
            spec = s.spec
            tau = self.effort[self.v_index[k]]
            s.set("present_position", int(round(plant.q[self.q_index[k]] / spec.rad_per_count))
                  + spec.position_center)
            s.set("present_velocity", int(round(plant.v[self.v_index[k]] / spec.rad_s_per_unit)))
            s.set("present_current", int(round(tau / spec.torque_constant / spec.amp_per_unit)))
            s.set("realtime_tick", int(self.sim_t * 1000) % 32768)

    def advance(self, now: float) -> None:
        if self.t0 is None:
            self.t0 = now
        target = now - self.t0
        if target - self.sim_t > 0.05:
            self.t0 += target - self.sim_t - self.dt
            target = now - self.t0
            self.stats["lag_skips"] += 1
        stepped = False
        while self.sim_t + self.dt <= target:
            self._torques()
            self.plant.step(self.dt, self.effort)
            for k, s in enumerate(self.servos):
                if not s.mem[64]:       # torque off: the 353:1 gear train holds the joint
                    self.plant.q[self.q_index[k]] = self.held[k]
                    self.plant.v[self.v_index[k]] = 0.0
                else:
                    self.held[k] = self.plant.q[self.q_index[k]]
            self.sim_t += self.dt
            self.stats["steps"] += 1
            stepped = True
        if stepped:
            self._update_registers()

    # -- protocol ------------------------------------------------------------------
    def _reply(self, servo: Servo, error: int, params, now: float, extra_delay: float = 0.0) -> None:
        if servo.get("status_return_level") == 0:
            return
        if self.drop_rate and self.rng.random() < self.drop_rate:
            self.stats["dropped"] += 1
            return
        data = bytearray(P.encode_status(servo.id, error, params))
        if self.corrupt_rate and self.rng.random() < self.corrupt_rate:
            data[-1] ^= 0x5A
            self.stats["corrupted"] += 1
        delay = servo.get("return_delay_time") * 2e-6 + extra_delay
        if extra_delay:
            self.stats["delayed"] += 1
        self.pending.append((now + delay, bytes(data)))
        self.stats["replies"] += 1

    def handle(self, pkt: P.Packet, now: float) -> None:
        self.stats["packets"] += 1
        inst, params = pkt.instruction, pkt.params
        if inst == P.STATUS:
            return
        targets = self.servos if pkt.id == P.BROADCAST_ID else \
            ([self.by_id[pkt.id]] if pkt.id in self.by_id else [])
        if inst == P.PING:
            for s in targets:
                self._reply(s, 0, P.u16(s.get("model_number")) + bytes([s.get("firmware_version")]), now)
        elif inst == P.READ and pkt.id != P.BROADCAST_ID:
            for s in targets:
                if len(params) != 4:
                    self._reply(s, P.ERROR_DATA_LENGTH, b"", now)
                    continue
                err, data = s.read(params[0] | params[1] << 8, params[2] | params[3] << 8)
                self._reply(s, err, data, now)
        elif inst == P.WRITE:
            for s in targets:
                if len(params) < 3:
                    err = P.ERROR_DATA_LENGTH
                else:
                    err = s.write(params[0] | params[1] << 8, params[2:])
                if pkt.id != P.BROADCAST_ID:
                    self._reply(s, err, b"", now)
        elif inst == P.SYNC_WRITE and pkt.id == P.BROADCAST_ID:
            self.stats["sync_writes"] += 1
            if len(params) < 4:
                return
            address, length = params[0] | params[1] << 8, params[2] | params[3] << 8
            for i in range(4, len(params) - length, length + 1):
                s = self.by_id.get(params[i])
                if s is not None:
                    s.write(address, params[i + 1:i + 1 + length])
        elif inst == P.SYNC_READ and pkt.id == P.BROADCAST_ID:
            self.stats["sync_reads"] += 1
            if len(params) < 5:
                return
            extra = self.delay_s if self.stats["sync_reads"] == self.delay_sync_read else 0.0
            address, length = params[0] | params[1] << 8, params[2] | params[3] << 8
            for dxl_id in params[4:]:
                s = self.by_id.get(dxl_id)
                if s is not None:
                    err, data = s.read(address, length)
                    self._reply(s, err, data, now, extra)
        elif inst == P.BULK_READ and pkt.id == P.BROADCAST_ID:
            for i in range(0, len(params) - 4, 5):
                s = self.by_id.get(params[i])
                if s is not None:
                    err, data = s.read(params[i + 1] | params[i + 2] << 8, params[i + 3] | params[i + 4] << 8)
                    self._reply(s, err, data, now)
        elif inst == P.BULK_WRITE and pkt.id == P.BROADCAST_ID:
            i = 0
            while i + 5 <= len(params):
                length = params[i + 3] | params[i + 4] << 8
                s = self.by_id.get(params[i])
                if s is not None:
                    s.write(params[i + 1] | params[i + 2] << 8, params[i + 5:i + 5 + length])
                i += 5 + length
        else:
            self.stats["bad_instruction"] += 1
            for s in targets if pkt.id != P.BROADCAST_ID else []:
                self._reply(s, P.ERROR_INSTRUCTION, b"", now)

    def due(self, now: float):
        """Pop the replies whose send time has come (in order)."""
        out = []
        keep = []
        for t, data in self.pending:
            (out if t <= now else keep).append((t, data))
        self.pending = keep
        return [d for _, d in sorted(out, key=lambda x: x[0])]


def serve(chain: ServoChain, master: int, stop) -> None:
    decoder = P.StreamDecoder()
    clock = time.perf_counter
    while not stop():
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
            decoder.feed(data)
            while True:
                pkt = decoder.pop()
                if pkt is None:
                    break
                chain.handle(pkt, clock())
            chain.stats["crc_errors_in"] = decoder.corrupt
        if chain.pending:
            for data in chain.due(clock()):
                try:
                    os.write(master, data)
                except OSError:
                    pass


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hil.dynamixel_emulator", description=__doc__.split("\n")[0])
    ap.add_argument("--robot", default="arm2", help="arm2/arm3 (built-in HIL arm) or a bundled model name")
    ap.add_argument("--urdf", default=None, help="URDF file of the robot (instead of --robot)")
    ap.add_argument("--ids", default=None, help="comma-separated servo ids (default 1..n)")
    ap.add_argument("--servo-model", default="XM430-W350")
    ap.add_argument("--initial", default=None, help="comma-separated initial joint positions (rad)")
    ap.add_argument("--viscous-friction", type=float, default=0.02)
    ap.add_argument("--dt", type=float, default=5e-4, help="plant step (s)")
    ap.add_argument("--drop-rate", type=float, default=0.0)
    ap.add_argument("--corrupt-rate", type=float, default=0.0)
    ap.add_argument("--delay-sync-read", type=int, default=0, help="1-based SYNC_READ whose replies are late")
    ap.add_argument("--delay-ms", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    model = load_robot(args.robot, args.urdf)
    chain = ServoChain(model, ids=None if args.ids is None else [int(x) for x in args.ids.split(",")],
                       servo_model=args.servo_model, viscous_friction=args.viscous_friction,
                       initial=None if args.initial is None else [float(x) for x in args.initial.split(",")],
                       dt=args.dt, drop_rate=args.drop_rate, corrupt_rate=args.corrupt_rate,
                       delay_sync_read=args.delay_sync_read, delay_ms=args.delay_ms, seed=args.seed)
    chain._torques()
    chain.plant.step(1e-6, chain.effort)        # load the compiled plant kernel before announcing the port
    chain.plant.reset(chain.plant.q.copy(), np.zeros(model.nv))
    master, slave = os.openpty()
    tty.setraw(master)
    tty.setraw(slave)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *a: stopping.append(1))
    signal.signal(signal.SIGINT, lambda *a: stopping.append(1))
    print(f"PORT {os.ttyname(slave)}", flush=True)
    try:
        serve(chain, master, lambda: bool(stopping))
    finally:
        print("STATS " + json.dumps(chain.stats), flush=True)
    return 0


class EmulatorProcess:
    """Start ``python -m hil.dynamixel_emulator`` and wait for its port; ``stop()`` returns its STATS."""

    def __init__(self, *args: str, startup_timeout: float = 120.0):
        self.proc = subprocess.Popen([sys.executable, "-m", "rtctl.hil.dynamixel_emulator", *args], cwd=str(ROOT),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + startup_timeout
        self.port = None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if line.startswith("PORT "):
                self.port = line.split()[1]
                break
        if self.port is None:
            self.proc.kill()
            raise RuntimeError(f"dynamixel emulator did not start: {self.proc.stderr.read()[-2000:]}")
        self.stats = None

    def kill(self) -> None:
        """SIGKILL (the 'emulator died' fault); no STATS."""
        self.proc.kill()

    def stop(self, timeout: float = 10.0) -> dict | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        for line in (out or "").splitlines():
            if line.startswith("STATS "):
                self.stats = json.loads(line[6:])
        return self.stats

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


if __name__ == "__main__":
    sys.exit(main())
