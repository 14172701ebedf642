"""The estimator component (loops/estimation/base.py): registry names, options and model checks with one-line
errors, bad inputs latching one-line faults, the lifecycle, the contact force threshold, both base kinds written
from the same estimate, warm-up, and no allocation per cycle (tracemalloc on ``update``, numba's runtime
counter on the compiled steps)."""
from __future__ import annotations

import textwrap
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from allocation_counter import run_with_allocation_counters
from rtctl.loops import estimation
from rtctl.loops.estimation import Estimator, InvariantEKF, LegOdometryKF
from rtctl.model import ModelBuilder
from rtctl.options import ConfigError
from rtctl.plants.legged.model import QUADRUPED_LEGS, box_inertia, cylinder_inertia, spatial_quadruped
from rtctl.registry import ESTIMATORS
from rtctl.rt.lifecycle import LifecycleState

CLASSES = {"invariant_ekf": InvariantEKF, "leg_odometry_kf": LegOdometryKF}
ROBOT = spatial_quadruped()
FEET = ROBOT.foot_names
STANDING = np.array([0.0, 0.0, 9.81, 0.0, 0.0, 0.0, np.nan, np.nan, np.nan, np.nan])
LOOPS_DIR = str(Path(estimation.__file__).parent)


def make(name, model=ROBOT.model, feet=FEET, foot_points=None, **options):
    cls = CLASSES[name]
    return cls(model, cls.Options(**options), feet=feet, foot_points=foot_points)


def standing_state():
    q = ROBOT.model.neutral_configuration()
    q[2] = 0.5
    q[6:] = np.tile([0.0, 0.5, -1.0], 4)
    return q, np.zeros(ROBOT.model.nv)


def test_registry_names_and_create():
    assert {"invariant_ekf", "leg_odometry_kf"} <= set(ESTIMATORS.names())
    for name, cls in CLASSES.items():
        assert ESTIMATORS.get(name) is cls and cls.name == name
        est = ESTIMATORS.create(name, ROBOT.model, feet=FEET, encoder_noise=1e-3)
        assert isinstance(est, Estimator) and est.options.encoder_noise == 1e-3 and est.n_feet == 4


@pytest.mark.parametrize("name", CLASSES)
def test_configuration_mistakes_are_one_line(name):
    with pytest.raises(ValueError, match=r"^invariant_ekf|^leg_odometry_kf") as info:
        make(name, feet=["front_left_foot", "front_rigth_foot"])
    assert "no link or frame named 'front_rigth_foot'" in str(info.value) and "did you mean" in str(info.value)
    with pytest.raises(ValueError, match="foot 'trunk' is not on a leg"):
        make(name, feet=["trunk"])
    with pytest.raises(ValueError, match=r"foot_points needs one \[x, y, z\] row per foot \(4\), got shape \[1, 3\]"):
        make(name, foot_points=[[0.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match=r"contact_force_off \(30.0 N\) must not exceed contact_force_on \(20.0 N\)"):
        make(name, contact_force_off=30.0)
    with pytest.raises(ConfigError, match="divergence_probability: must be <= 0.5"):
        make(name, divergence_probability=0.9)
    with pytest.raises(ValueError, match="4 feet but 3 contacts"):
        make(name, contacts=["a", "b", "c"])
    b = ModelBuilder("arm")
    inertia = np.diag([0.01, 0.01, 0.01])
    link = b.add_body("link", -1, "revolute", axis=(0, 0, 1), mass=1.0, com=(0, 0, 0.1), inertia=inertia)
    b.add_body("tip", link, "revolute", axis=(0, 1, 0), translation=(0, 0, 0.2), mass=1.0, inertia=inertia)
    with pytest.raises(ValueError, match="writes a 'free_flyer', 'euler' or 'planar' floating base, this model's "
                                         "base is 'fixed'"):
        make(name, b.build(), feet=["tip"])
    est = make(name)
    with pytest.raises(ValueError, match="the IMU is on 'front_left_thigh'; the estimators need it on the base "
                                         "body 'trunk'"):
        est.mount_imu(ROBOT.model.body_index("front_left_thigh"), np.eye(3), np.zeros(3))
    with pytest.raises(ValueError, match="rotation must be a 3 x 3 rotation matrix"):
        est.mount_imu(est.base_body, np.diag([1.0, 1.0, -1.0]), np.zeros(3))
    for message in (str(info.value),):
        assert "\n" not in message


BAD = {
    "specific force": (lambda imu, q, v, c: imu.__setitem__(1, np.nan),
                       "IMU sample not finite: specific force [0.0, nan, 9.81], angular rate [0.0, 0.0, 0.0]"),
    "joint position": (lambda imu, q, v, c: q.__setitem__(10, np.inf),
                       "joint 'front_right_hip_pitch' position is inf"),
    "joint velocity": (lambda imu, q, v, c: v.__setitem__(17, np.nan), "joint 'hind_right_knee' velocity is nan"),
    "contact": (lambda imu, q, v, c: c.__setitem__(2, np.nan), "contact input of foot 'hind_left_foot' is nan"),
}


@pytest.mark.parametrize("what", BAD)
@pytest.mark.parametrize("name", CLASSES)
def test_bad_input_latches_a_one_line_fault_and_leaves_the_state(name, what):
    est = make(name)
    est.on_start()
    q, v = standing_state()
    est.reset(q, v)
    contact = np.ones(4)
    assert est.step(0.0, STANDING, contact, q, v)
    imu = STANDING.copy()
    BAD[what][0](imu, q, v, contact)
    q0, v0 = q.copy(), v.copy()
    assert not est.step(1e-3, imu, contact, q, v)
    assert est.fault_reason == f"estimator '{name}': {BAD[what][1]}"
    assert est.lifecycle_state == LifecycleState.ERROR and est.error_reason == est.fault_reason
    np.testing.assert_array_equal(q, q0)
    np.testing.assert_array_equal(v, v0)
    assert not est.step(2e-3, STANDING, np.ones(4), *standing_state())   # latched


@pytest.mark.parametrize("name", CLASSES)
def test_other_types_take_the_slow_path_and_a_wrong_shape_is_one_line(name):
    """Lists and float32 arrays run through float64 copies (q and v written back) with the same result; an
    IMU reading of the wrong length latches a fault naming it."""
    fast, slow = make(name), make(name)
    q, v = standing_state()
    results = []
    for est, convert in ((fast, lambda a: a), (slow, lambda a: a.astype(np.float32).tolist())):
        est.on_start()
        qq, vv = q.copy(), v.copy()
        est.reset(qq, vv)
        ql = list(qq) if convert is not None and est is slow else qq
        for k in range(3):
            assert est.step(k * 1e-3, convert(STANDING), convert(np.ones(4)), ql, vv)
        results.append(np.array(ql, dtype=float))
    np.testing.assert_allclose(results[0], results[1], atol=1e-6)
    assert not slow.step(0.01, STANDING[:6], np.ones(4), q, v)
    assert slow.fault_reason == f"estimator '{name}': imu must be 10 numbers, got ndarray of shape [6]"


@pytest.mark.parametrize("name", CLASSES)
def test_time_going_back_is_named(name):
    est = make(name)
    est.on_start()
    q, v = standing_state()
    assert est.step(1.0, STANDING, np.ones(4), q, v)
    assert not est.step(0.999, STANDING, np.ones(4), q, v)
    assert est.fault_reason == (f"estimator '{name}': time step -0.0010000000000000009 s since the last update is "
                                "outside [0, 1) s")


@pytest.mark.parametrize("name", CLASSES)
def test_standing_still_and_the_lifecycle(name):
    """Started from the first IMU sample (level, at the origin) the estimate of a robot standing still stays at
    rest; after a fault, the next run's start (on_start) starts it again."""
    est = make(name)
    est.on_start()
    q, v = standing_state()
    tilted = STANDING.copy()
    tilted[:3] = 9.81 * np.array([-np.sin(0.1), 0.0, np.cos(0.1)])   # pitched 0.1 rad nose down
    for k in range(500):
        q[6:], v[6:] = standing_state()[0][6:], 0.0
        assert est.step(k * 1e-3, tilted, np.ones(4), q, v), est.fault_reason
    np.testing.assert_allclose(q[3:6], [0.0, 0.1, 0.0], atol=1e-6)   # yaw, pitch, roll of the zyx chain
    np.testing.assert_allclose(v[:6], 0.0, atol=1e-6)
    np.testing.assert_allclose(q[:2], 0.0, atol=1e-6)
    assert not est.step(0.6, STANDING * np.nan, np.ones(4), q, v)
    est.on_start()
    assert est.fault_reason == "" and est.lifecycle_state != LifecycleState.ERROR
    assert est.step(0.0, STANDING, np.ones(4), q, v)
    np.testing.assert_allclose(q[3:6], 0.0, atol=1e-9)


@pytest.mark.parametrize("name", CLASSES)
def test_contact_force_threshold_has_hysteresis(name):
    est = make(name, contact_source="force", contact_force_on=20.0, contact_force_off=10.0)
    est.on_start()
    q, v = standing_state()
    est.reset(q, v)
    seen = []
    for k, force in enumerate([0.0, 15.0, 25.0, 15.0, 9.0, 15.0, 30.0]):
        est.step(k * 1e-3, STANDING, np.full(4, force), q, v)
        seen.append(est.contact[0])
    assert seen == [0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0]


def free_flyer_quadruped():
    """The seed quadruped with a free-flyer trunk instead of the Euler-angle chain (same legs and inertias)."""
    width, l0, l_leg = 0.3, 1.0, 0.3
    b = ModelBuilder("quadruped_free_flyer")
    trunk = b.add_body("trunk", -1, "free_flyer", mass=4.0, inertia=box_inertia(4.0, (l0, width, 0.1)))
    leg_inertia = cylinder_inertia(1.0, l_leg, 0.02, axis=2)
    for leg, hip in zip(QUADRUPED_LEGS, ROBOT.hip_offsets):
        roll = b.add_body(f"{leg}_hip", trunk, "revolute", axis=(1, 0, 0), translation=hip)
        thigh = b.add_body(f"{leg}_thigh", roll, "revolute", axis=(0, 1, 0), mass=1.0, com=(0, 0, -l_leg / 2),
                           inertia=leg_inertia)
        shank = b.add_body(f"{leg}_shank", thigh, "revolute", axis=(0, 1, 0), translation=(0, 0, -l_leg), mass=1.0,
                           com=(0, 0, -l_leg / 2), inertia=leg_inertia)
        b.add_frame(f"{leg}_foot", shank, translation=(0, 0, -l_leg))
    return b.build()


@pytest.mark.parametrize("name", CLASSES)
def test_free_flyer_and_euler_chain_written_from_the_same_estimate(name):
    """The same readings through the quadruped's Euler chain and through a free-flyer twin: the same IMU
    estimate, and q, v of each describe the same base pose and twist (quaternion and Euler angles of one
    rotation; world velocity and its body-axes form)."""
    from scipy.spatial.transform import Rotation
    ff = free_flyer_quadruped()
    euler, flyer = make(name), make(name, ff)
    rng = np.random.default_rng(3)
    q_e, v_e = standing_state()
    q_f, v_f = ff.neutral_configuration(), np.zeros(ff.nv)
    q_f[2] = 0.5
    for est, q, v in ((euler, q_e, v_e), (flyer, q_f, v_f)):
        est.on_start()
        est.reset(q, v)
    imu = STANDING.copy()
    for k in range(300):
        imu[:6] = STANDING[:6] + rng.normal(size=6) * 0.2
        joints = np.tile([0.0, 0.5, -1.0], 4) + rng.normal(size=12) * 0.01
        rates = rng.normal(size=12) * 0.1
        contact = (rng.random(4) > 0.3).astype(float)
        q_e[6:], q_f[7:], v_e[6:], v_f[6:] = joints, joints, rates, rates
        assert euler.step(k * 1e-3, imu, contact, q_e, v_e) == flyer.step(k * 1e-3, imu, contact, q_f, v_f)
        for a, b in zip(euler.imu_state(), flyer.imu_state()):
            np.testing.assert_allclose(a, b, atol=1e-9)
        r = Rotation.from_quat(q_f[3:7]).as_matrix()
        np.testing.assert_allclose(Rotation.from_euler("ZYX", q_e[3:6]).as_matrix(), r, atol=1e-9)
        np.testing.assert_allclose(q_e[:3], q_f[:3], atol=1e-9)
        np.testing.assert_allclose(v_e[:3], r @ v_f[:3], atol=1e-9)
    assert euler.fault_reason == flyer.fault_reason


@pytest.mark.parametrize("name", CLASSES)
def test_warm_leaves_the_estimate_as_it_was(name):
    est, ref = make(name), make(name)
    q, v = standing_state()
    est.warm()
    outs = []
    for e in (est, ref):
        e.on_start()
        qq, vv = q.copy(), v.copy()
        e.reset(qq, vv)
        for k in range(50):
            assert e.step(k * 1e-3, STANDING, np.ones(4), qq, vv)
        outs.append((qq, vv, e.covariance.copy()))
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", CLASSES)
def test_update_allocates_nothing(name):
    est = make(name)
    est.on_start()
    q, v = standing_state()
    est.reset(q, v)
    contact = np.ones(4)
    for k in range(10):
        est.step(k * 1e-3, STANDING, contact, q, v)
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        for k in range(10, 1010):
            contact[k % 4] = float(k % 50 > 10)   # lift-offs and touch-downs
            est.step(k * 1e-3, STANDING, contact, q, v)
        peak = tracemalloc.get_traced_memory()[1] - base
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    growth = [s for s in after.compare_to(before, "filename")
              if s.traceback[0].filename.startswith(LOOPS_DIR) and (s.size_diff > 0 or s.count_diff > 0)]
    assert not growth, growth
    assert peak < 1024, peak
    assert est.fault_reason == ""


NRT_SCRIPT = textwrap.dedent("""
    import numpy as np
    from numba import njit
    from rtctl.loops.estimation import InvariantEKF, LegOdometryKF
    from rtctl.loops.estimation.invariant_ekf import ekf_step
    from rtctl.loops.estimation.leg_odometry import odometry_step
    from rtctl.plants.legged.model import spatial_quadruped

    @njit
    def ekf_cycles(n, mi, mf, ws, q, v, imu, contact, cfg_i, cfg_f, par, x, P, work, diag):
        bad = 0
        for k in range(n):
            contact[k % 4] = 1.0 if k % 50 > 10 else 0.0
            bad += ekf_step(mi, mf, ws, q, v, 1e-3, imu, contact, cfg_i, cfg_f, par, x, P, work, diag)
        return bad

    @njit
    def odometry_cycles(n, mi, mf, ws, q, v, imu, contact, cfg_i, cfg_f, par, x, P, o, work, diag):
        bad = 0
        for k in range(n):
            contact[k % 4] = 1.0 if k % 50 > 10 else 0.0
            bad += odometry_step(mi, mf, ws, q, v, 1e-3, imu, contact, cfg_i, cfg_f, par, x, P, o, work, diag)
        return bad

    robot = spatial_quadruped()
    m = robot.model
    q = m.neutral_configuration()
    q[2], q[6:] = 0.5, np.tile([0.0, 0.5, -1.0], 4)
    v = np.zeros(m.nv)
    imu = np.array([0.0, 0.0, 9.81, 0.0, 0.0, 0.0, np.nan, np.nan, np.nan, np.nan])
    for cls, cycles in ((InvariantEKF, ekf_cycles), (LegOdometryKF, odometry_cycles)):
        est = cls(m, feet=robot.foot_names)
        est.reset(q, v)
        state = (est.x, est.P, est.work, est.diag) if cls is InvariantEKF else (est.x, est.P, est.o, est.work, est.diag)
        args = (m.packed_int, m.packed_float, est.ws, q, v, imu, np.ones(4), est.cfg_i, est.cfg_f, est.par, *state)
        assert cycles(1, *args) == 0
        counts = allocations(cycles, *args)
        print(cls.__name__, "allocations for 1 and 300 cycles:", counts)
        assert counts[0] == counts[1], counts
    print("OK")
""")


@pytest.mark.slow
def test_compiled_steps_allocate_nothing():
    out = run_with_allocation_counters(NRT_SCRIPT)
    assert out.strip().endswith("OK"), out
