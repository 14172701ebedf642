"""SOEM (pysoem) runs the emulated CiA 402 EtherCAT drives of can_arm2 in cyclic synchronous torque (CST): the PDO
mapping rewritten by SDO in PRE-OP from SOEM's configuration hook (ETG.1000.6 5.6.7: 0x1C12 / 0x1C13 sub-index 0
to 0, the mapping 0x1600 / 0x1A00 entries, the counts, the assignment), SOEM's map sized by it, the line in OP,
the CiA 402 state machine walked to OPERATION ENABLED (CiA 402-2 6.3) and torques commanded in per mille of the
rated torque 0x6076 (CiA 402-2 6.4.3 / 0x6071), positions read in increments of the motor shaft (0x608F) through
the gear 0x6091. The physics is checked against rtctl's own model of the arm (rtctl.dynamics: g(q), M(q)):
gravity compensation holds the arm still, an extra torque accelerates it as M(q) and the joints' viscous
friction predict, and the velocity actual value 0x606C integrates to the position actual value 0x6064. Each
input sample carries its time (the timestamp object 0x10F8, ETG.1020: the slave's clock, here the monotonic
clock of the machine), so the check does not depend on when the test's own process got to run.
Mappings the slave refuses come back to SOEM as SDO aborts with their codes (0x06040041, 0x06040042)."""
from __future__ import annotations

import contextlib
import math
import struct
import time

import numpy as np
import pytest

from rtctl.hil.ethercat import netns

from ethercat_line import emulated_line

pysoem = pytest.importorskip("pysoem")
pytestmark = pytest.mark.slow
WHY_NOT = netns.unavailable()
if WHY_NOT:
    pytest.skip(WHY_NOT, allow_module_level=True)

RECEIVE_TIMEOUT_US = 200_000
STATE_TIMEOUT_US = 2_000_000
CYCLE_S = 0.002
CST = 10
# (index, sub-index, bits): the CST layout, each at the byte offset the entries before it make.
RX_CST = [(0x6040, 0, 16), (0x6071, 0, 16), (0x6060, 0, 8)]                     # 0, 2, 4: 5 bytes
TX_CST = [(0x6041, 0, 16), (0x6064, 0, 32), (0x606C, 0, 32), (0x6077, 0, 16),   # 0, 2, 6, 10
          (0x6061, 0, 8), (0x603F, 0, 16), (0x10F8, 0, 64)]                       # 12, 13, 15: 23 bytes
OUT, IN = struct.Struct("<Hhb"), struct.Struct("<HiihbHQ")


@contextlib.contextmanager
def line(*args: str):
    """(master, stop) on the emulator with ``args`` in a fresh namespace; ``stop()`` its STATS."""
    with emulated_line(*args) as (ns, _proc, stop):
        master = pysoem.Master()
        try:
            with netns.inside(ns):
                master.open(netns.MASTER_END)
            yield master, stop
        finally:
            master.close()


def write_mapping(slave, index: int, entries) -> None:
    """ETG.1000.6 5.6.7: sub-index 0 to 0, the entries one by one, then the count."""
    slave.sdo_write(index, 0, b"\x00")
    for k, (obj, sub, bits) in enumerate(entries, 1):
        slave.sdo_write(index, k, struct.pack("<I", obj << 16 | sub << 8 | bits))
    slave.sdo_write(index, 0, bytes([len(entries)]))


def remap_to_cst(master):
    """SOEM's configuration hook (run by config_map in PRE-OP, before it reads the mapping back) per slave."""
    def configure(position: int) -> None:
        slave = master.slaves[position]
        for assignment in (0x1C12, 0x1C13):
            slave.sdo_write(assignment, 0, b"\x00")
        write_mapping(slave, 0x1600, RX_CST)
        write_mapping(slave, 0x1A00, TX_CST)
        for assignment, pdo in ((0x1C12, 0x1600), (0x1C13, 0x1A00)):
            slave.sdo_write(assignment, 1, struct.pack("<H", pdo))
            slave.sdo_write(assignment, 0, b"\x01")
    for slave in master.slaves:
        slave.config_func = configure


class Arm:
    """The master's side: each drive's scaling read by SDO (CiA 402-2: 0x6076 rated torque in mN m, 0x608F
    increments per motor revolution, 0x6091 motor per shaft revolutions) and one process data cycle at a time,
    every input sample logged with the target torques sent in that frame."""

    def __init__(self, master):
        self.master = master
        s = master.slaves
        self.rated_nm = np.array([struct.unpack("<I", x.sdo_read(0x6076, 0))[0] / 1000.0 for x in s])
        increments = np.array([struct.unpack("<I", x.sdo_read(0x608F, 1))[0] for x in s], dtype=float)
        motor = np.array([struct.unpack("<I", x.sdo_read(0x6091, 1))[0] for x in s], dtype=float)
        shaft = np.array([struct.unpack("<I", x.sdo_read(0x6091, 2))[0] for x in s], dtype=float)
        self.ratio = motor / shaft
        self.rad = 2 * math.pi / increments / self.ratio            # joint rad per motor increment
        self.log: list = []                                          # (inputs of each slave, permille sent)

    def permille(self, joint_torque):
        """Joint N m -> the target torque 0x6071 of each drive (motor torque, per mille of rated)."""
        return np.round(np.asarray(joint_torque) / self.ratio / self.rated_nm * 1000.0).astype(int)

    def joint_torque(self, permille):
        return np.asarray(permille) / 1000.0 * self.rated_nm * self.ratio

    def cycle(self, controlword: int, permille) -> list[tuple]:
        for slave, p in zip(self.master.slaves, permille):
            slave.output = OUT.pack(controlword, int(p), CST)
        start = time.monotonic()
        self.master.send_processdata()
        assert self.master.receive_processdata(RECEIVE_TIMEOUT_US) == self.master.expected_wkc
        inputs = [IN.unpack(s.input) for s in self.master.slaves]
        self.log.append((inputs, np.array(permille)))
        time.sleep(max(0.0, CYCLE_S - (time.monotonic() - start)))
        return inputs

    def state(self, inputs):
        q = np.array([i[1] for i in inputs]) * self.rad
        v = np.array([i[2] for i in inputs]) * self.rad
        return q, v

    def under(self, permille, since: int):
        """The samples the torques ``permille``, first sent at log entry ``since``, made (torque actual 0x6077:
        the torque since the sample before): (times from the first, q, v) of their contiguous run, one per
        sample. The slave samples the plant before it takes a frame's outputs, so between two samples of the run
        the torque was ``permille`` throughout: the first sample is the state the prediction starts from. The
        reply to entry ``since`` carries a sample from before it: left out, as an earlier frame's torque may
        have been the same."""
        run, seen = [], set()
        for inputs, _ in self.log[since + 1:]:
            stamp = inputs[0][6]
            assert all(i[6] == stamp for i in inputs)                 # one frame, one clock
            if stamp in seen:
                continue
            seen.add(stamp)
            if [i[3] for i in inputs] == list(permille):
                run.append((stamp * 1e-9, *self.state(inputs)))
            elif run:
                break
        t, q, v = (np.array(x) for x in zip(*run))
        return t - t[0], q, v


def simulate(dyn, viscous, q0, v0, torque, times, step=2.5e-4):
    """q at ``times`` (from 0) of rtctl's model of the arm under the constant joint ``torque`` and viscous joint
    friction from (q0, v0): M(q) a = torque - viscous v - h(q, v) (h: gravity, Coriolis and centrifugal forces),
    by classic Runge-Kutta in steps of at most ``step``."""
    def f(x):
        q, v = x[:len(q0)], x[len(q0):]
        a = np.linalg.solve(dyn.mass_matrix(q), torque - viscous * v - dyn.nonlinear_effects(q, v))
        return np.concatenate([v, a])

    x, now, out = np.concatenate([q0, v0]).astype(float), 0.0, []
    for t in times:
        n = max(1, math.ceil((t - now) / step))
        h = (t - now) / n
        for _ in range(n):
            k1 = f(x)
            k2 = f(x + h / 2 * k1)
            k3 = f(x + h / 2 * k2)
            k4 = f(x + h * k3)
            x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        now = t
        out.append(x[:len(q0)].copy())
    return np.array(out)


def test_soem_runs_the_drives_in_cst_and_the_arm_obeys_its_model():
    from rtctl.dynamics import Dynamics
    from rtctl.hil.can_robot import VISCOUS_FRICTION, build_arm2

    model = build_arm2()
    dyn = Dynamics(model)
    with line("--robot", "can_arm2") as (master, stop):
        assert master.config_init() == 2
        for slave in master.slaves:
            assert struct.unpack("<I", slave.sdo_read(0x6502, 0))[0] & 1 << 9          # CST supported
        remap_to_cst(master)
        assert master.config_map() == 2 * (5 + 23)
        assert [(len(s.output), len(s.input)) for s in master.slaves] == [(5, 23)] * 2
        assert master.slaves[1].sdo_read(0x1A00, 0, ca=True) == struct.pack("<H", len(TX_CST)) + b"".join(
            struct.pack("<I", i << 16 | s << 8 | b) for i, s, b in TX_CST)
        assert master.state_check(pysoem.SAFEOP_STATE, STATE_TIMEOUT_US) == pysoem.SAFEOP_STATE
        arm = Arm(master)
        assert np.allclose(arm.ratio, 10.0) and np.allclose(arm.rated_nm, 1.0)
        master.state = pysoem.OP_STATE
        master.send_processdata()
        master.receive_processdata(RECEIVE_TIMEOUT_US)
        master.write_state()
        assert master.state_check(pysoem.OP_STATE, STATE_TIMEOUT_US) == pysoem.OP_STATE
        zero = [0, 0]
        walk = []
        for controlword in (0x0000, 0x0006, 0x0007, 0x000F):                    # CiA 402-2 6.3 transitions 2-4
            walk.append([i[0] & 0x006F for i in [arm.cycle(controlword, zero) for _ in range(3)][-1]])
        assert walk == [[0x0040] * 2, [0x0021] * 2, [0x0023] * 2, [0x0027] * 2]

        # Settle at the initial posture q = 0 (both links horizontal; the arm fell while the drives were off):
        # computed torque, tau = g(q) + M(q) (kp (0 - q) - kd v), critically damped at 10 rad/s.
        end = time.monotonic() + 1.5
        inputs = arm.cycle(0x000F, zero)
        while time.monotonic() < end:
            q, v = arm.state(inputs)
            tau = dyn.gravity_forces(q) + dyn.mass_matrix(q) @ (100.0 * (0.0 - q) - 20.0 * v)
            inputs = arm.cycle(0x000F, arm.permille(tau))
        q_settled, _ = arm.state(inputs)
        assert np.all(np.abs(q_settled) < 0.01), q_settled

        def phase(permille, seconds):
            start = len(arm.log)
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                arm.cycle(0x000F, permille)
            return start

        # Hold: g(q) at the settled posture, rounded to whole per mille of the motors' rated torque, 0.3 s; then
        # push: 0.3 N m more at the shoulder, 0.15 s.
        hold_permille = arm.permille(dyn.gravity_forces(q_settled))
        hold = phase(hold_permille, 0.3)
        push_permille = hold_permille + arm.permille([0.3, 0.0])
        push = phase(push_permille, 0.15)
        stats = stop()
    for inputs, _ in arm.log[hold:]:
        assert [i[0] & 0x106F for i in inputs] == [0x1027] * 2                      # OE, following the command
        assert [(i[4], i[5]) for i in inputs] == [(CST, 0)] * 2                      # mode display, no error
    slaves = stats["slaves"]
    assert [(s["drive_state"], s["mode"]) for s in slaves] == [("OPERATION ENABLED", CST)] * 2
    assert [s["target_torque"] for s in slaves] == list(push_permille)
    stalled = f"the emulator's plant skipped {slaves[0]['plant_skipped_s']} s (stalls beyond 20 ms)"

    # The hold: from its first sample the arm moves as rtctl's model of it says under the torque applied -- g(q)
    # rounded to whole per mille of the rated motor torque, a residual of at most 5 mN m at a joint, which the
    # viscous friction (0.05 N m s/rad) lets drift at up to 0.1 rad/s: within the drift the worst rounding
    # allows, and a twentieth of the free fall's (the links swing down together: the elbow's angle hardly moves).
    t, q, v = arm.under(hold_permille, hold)
    applied = arm.joint_torque(hold_permille)
    assert np.all(np.abs(applied - dyn.gravity_forces(q[0])) <= arm.joint_torque([0.5, 0.5]) + 1e-12)
    predicted = simulate(dyn, VISCOUS_FRICTION, q[0], v[0], applied, t)
    drift, error = np.abs(q - q[0]).max(axis=0), np.abs(q - predicted).max(axis=0)
    worst = np.max([np.abs(simulate(dyn, VISCOUS_FRICTION, q[0], v[0], dyn.gravity_forces(q[0]) + arm.joint_torque(
        [0.5 * a, 0.5 * b]), t) - q[0]).max(axis=0) for a in (-1, 1) for b in (-1, 1)], axis=0)
    fall = np.abs(simulate(dyn, VISCOUS_FRICTION, q[0], v[0], np.zeros(2), t[-1:]) - q[0]).max(axis=0)
    print(f"hold: {len(t)} samples over {t[-1]:.3f} s, drift {drift} rad, worst rounding {worst} rad, "
          f"free fall {fall} rad, model error {error} rad")
    assert t[-1] > 0.2
    assert np.all(drift <= worst + 1e-4) and np.linalg.norm(drift) < np.linalg.norm(fall) / 20, (drift, worst, fall)
    assert np.all(error < 3e-5), (error, drift, stalled)

    # The push: the shoulder accelerates at first by M(q)^-1 (tau - g) (23 rad/s^2 per N m) and, through M's
    # off-diagonal term, the elbow swings back (-64 rad/s^2 per N m), the friction slowing both. Bound (here and
    # for the hold): 6 position increments (4.8 urad each at the joint; the start state is quantized to one) plus
    # 0.1 % of the excursion (the plant's RK4 in sub-steps of up to 0.5 ms against the prediction's 0.25 ms).
    t, q, v = arm.under(push_permille, push)
    applied = arm.joint_torque(push_permille)
    predicted = simulate(dyn, VISCOUS_FRICTION, q[0], v[0], applied, t)
    excursion, error = np.abs(predicted - q[0]).max(axis=0), np.abs(q - predicted).max(axis=0)
    early = np.linalg.solve(dyn.mass_matrix(q[0]), applied - dyn.gravity_forces(q[0]))
    print(f"push: {len(t)} samples over {t[-1]:.3f} s, M^-1 (tau - g) {early} rad/s^2, excursion {excursion} "
          f"rad, model error {error} rad")
    assert t[-1] > 0.1
    assert excursion[0] > 0.02 and excursion[1] > 0.02                    # it moved, both joints
    assert np.all(error < 1e-3 * excursion + 3e-5), (error, excursion, stalled)

    # Velocity actual 0x606C against the positions: its trapezoidal integral over the push's samples is the
    # position change, within 1 % (the trapezoids' error under the elbow's friction-bent velocity: 1 % with
    # samples 20 ms apart, 0.06 % at 5 ms).
    integral = np.sum((v[1:] + v[:-1]) / 2 * np.diff(t)[:, None], axis=0)
    print(f"push: integral of velocity actual {integral} rad, position change {q[-1] - q[0]} rad")
    assert np.allclose(integral, q[-1] - q[0], rtol=0.01, atol=3e-5), (integral, q[-1] - q[0])


def test_mappings_the_slave_refuses_reach_soem_as_abort_codes():
    """ETG.1000.6 5.6.7 / 5.6.2.7 through SOEM's SDO: an input (statusword 0x6041) in the RxPDO and an object
    not mappable (rated torque 0x6076) 0x06040041; RxPDOs assigned together beyond the 42 bytes of SM2
    0x06040042. SOEM then maps what the slave kept."""
    with line("--slaves", "1") as (master, stop):
        assert master.config_init() == 1
        slave = master.slaves[0]
        slave.sdo_write(0x1600, 0, b"\x00")
        for obj, bits in ((0x6041, 16), (0x6076, 32)):
            with pytest.raises(pysoem.SdoError) as refused:
                slave.sdo_write(0x1600, 1, struct.pack("<I", obj << 16 | bits))
            assert refused.value.abort_code == 0x06040041
        slave.sdo_write(0x1600, 0, b"\x03")
        write_mapping(slave, 0x1601, [(0x607A, 0, 32), (0x60FF, 0, 32)] * 4)
        write_mapping(slave, 0x1602, [(0x60FF, 0, 32)])
        slave.sdo_write(0x1C12, 0, b"\x00")
        for k, pdo in enumerate((0x1600, 0x1601, 0x1602), 1):
            slave.sdo_write(0x1C12, k, struct.pack("<H", pdo))
        with pytest.raises(pysoem.SdoError) as refused:
            slave.sdo_write(0x1C12, 0, b"\x03")                                   # 7 + 32 + 4 = 43 bytes
        assert refused.value.abort_code == 0x06040042
        slave.sdo_write(0x1C12, 0, b"\x02")                                       # 39 bytes
        assert master.config_map() == 39 + 7
        assert master.state_check(pysoem.SAFEOP_STATE, STATE_TIMEOUT_US) == pysoem.SAFEOP_STATE
        assert stop()["slaves"][0]["sdo"]["aborts"] == 3
