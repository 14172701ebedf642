"""Cartesian impedance control of the 7-DOF arm's tool frame (loops/impedance.py, loops/cartesian.py).

* The law against an independent formulation with Pinocchio (frame Jacobian, M, g, C v, J-dot v, the
  task-space inertia, the null-space projector, the damping design by SciPy's generalized eigensolver).
* Stiffness: a constant wrench on the tool displaces it by K^-1 F (exact statics, module docstring of
  loops/impedance.py): the measured stiffness per axis is within 5 % of K (the issue's bound; the run
  agrees to better than 1e-4), with no motion along the other axes.
* A Cartesian minimum-jerk move (0.2 m and 0.3 rad in 1 s, K = 2000 N/m, 100 N m/rad, critically
  damped, no inertia feed-forward) is tracked within the bound of a critically damped spring driven by
  the inertial force: max |e| <= ||Lambda_lin|| a_peak / k (a non-negative impulse response of
  integral 1/k); measured 2.67 mm (and 6.0 mrad) against 7.43 mm. With the inertia feed-forward, 0.012 mm
  (asserted within 0.05 mm).
* set_impedance over the control channel changes the measured stiffness, blends it in without a torque
  step, and is refused with one line for NaN, a non-SPD K, another controller and a missing token; the
  e-stop answers within 10 ms right after a fuzz of set_impedance requests.
* Bad options name the key: an unknown frame (with the nearest names), a non-positive K.
"""
import json
import math
import time
import tracemalloc

import msgpack
import numpy as np
import pinocchio as pin
import pytest
import scipy.linalg
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# Importing the modules registers cartesian_impedance and cartesian_min_jerk in-process (no entry point needed).
from rtctl.loops.cartesian import CartesianMinimumJerk, exp_rotation, log_rotation
from rtctl.loops.impedance import CartesianImpedance, task_matrix
from rtctl.loops.trajectories import create_trajectory
from rtctl.loops.impedance_plots import plot_stiffness
from scipy.spatial.transform import Rotation
from telemetry_helpers import make_loop, run_in_background, signed

import rtctl
from rtctl.config import build, validate
from rtctl.dynamics import Dynamics
from rtctl.model import rpy_to_matrix
from rtctl.model.urdf import load_urdf
from rtctl.options import ConfigError
from rtctl.operator import ControlServer, request
from rtctl.operator.handshake import ClientHandshake

TOKEN = "impedance-token-0123456789abcdef"
Q0 = [0.1, 0.6, 0.0, -1.2, 0.1, 0.8, 0.2]     # away from singularities and joint limits
K_SET = [800.0, 1200.0, 1600.0, 40.0, 60.0, 80.0]   # distinct per axis: a mixed-up axis shows
DT = 1e-3


def config(controller=None, trajectory=None, **sections):
    raw = {"robot": {"model": "arm7"}, "plant": {"initial_position": Q0},
           "controller": {"type": "cartesian_impedance", "frame": "tool", "stiffness": K_SET, **(controller or {})},
           "trajectory": trajectory or {"type": "cartesian_min_jerk", "duration": 1.0},
           "driver": {"gear_ratio": 100.0, "rotor_inertia": 5e-6},    # the demo's drives: 0.05 kg m^2 per joint
           "loop": {"rate_hz": 1000.0, "pace": False}}
    raw.update(sections)
    return raw


def arm_loop(controller=None, trajectory=None, **sections):
    return build(validate(config(controller, trajectory, **sections)))


def push(loop, wrench, rise=0.5):
    """Load the tool with ``wrench`` ([n; f], world axes, about the tool frame's origin) from the next cycle on,
    rising smoothly (minimum-jerk profile) over ``rise`` s so that the light wrist is not kicked, then held;
    re-applied every cycle so its lever arm follows the frame."""
    plant = loop.drivers[0].plant
    wrench = np.asarray(wrench, dtype=float)
    t_on = loop.cycle * loop.period

    def hook(lp):
        tau = min(1.0, (lp.cycle * lp.period - t_on) / rise)
        plant.set_external_wrench("tool", wrench * tau ** 3 * (10 - 15 * tau + 6 * tau ** 2))
    loop.boundary_hooks.append(hook)
    return hook


def displacement(pose_before, pose_after):
    """[rotation vector of R_after R_before^T; p_after - p_before] (rad, m; world axes)."""
    r0, r1 = pose_before[:9].reshape(3, 3), pose_after[:9].reshape(3, 3)
    return np.concatenate([Rotation.from_matrix(r1 @ r0.T).as_rotvec(), pose_after[9:] - pose_before[9:]])


# -- the law against Pinocchio ----------------------------------------------------------------------
def swap(x):
    """[linear; angular] <-> [angular; linear] of a 6-vector or the rows of a 6 x n matrix."""
    return np.concatenate([x[3:], x[:3]])


def pinocchio_effort(pm, pd, fid, q, v, q_d, qd_d, qdd_d, K, D, zeta, kn, dn, coriolis, feedforward):
    """The law of loops/impedance.py written with Pinocchio quantities and dense linear algebra."""
    pin.forwardKinematics(pm, pd, q_d, qd_d, qdd_d)
    pin.updateFramePlacements(pm, pd)
    placement_d = pd.oMf[fid].copy()
    rate_d = swap(pin.getFrameClassicalAcceleration(pm, pd, fid, pin.LOCAL_WORLD_ALIGNED).vector)
    pin.computeJointJacobians(pm, pd, q_d)
    twist_d = swap(pin.getFrameJacobian(pm, pd, fid, pin.LOCAL_WORLD_ALIGNED)) @ qd_d
    pin.forwardKinematics(pm, pd, q, v, np.zeros(7))
    pin.updateFramePlacements(pm, pd)
    jdv = swap(pin.getFrameClassicalAcceleration(pm, pd, fid, pin.LOCAL_WORLD_ALIGNED).vector)
    placement = pd.oMf[fid].copy()
    pin.computeJointJacobians(pm, pd, q)
    J = swap(pin.getFrameJacobian(pm, pd, fid, pin.LOCAL_WORLD_ALIGNED))
    M = pin.crba(pm, pd, q)
    M = np.triu(M) + np.triu(M, 1).T
    g = pin.computeGeneralizedGravity(pm, pd, q)
    h = pin.rnea(pm, pd, q, v, np.zeros(7)) if coriolis else g
    e = np.concatenate([pin.log3(placement_d.rotation @ placement.rotation.T),
                        placement_d.translation - placement.translation])
    Minv = np.linalg.inv(M)
    Lam = np.linalg.inv(J @ Minv @ J.T)
    if zeta is not None:   # Lambda = Q Q^T, K = Q K0 Q^T: Q = Phi^-T of the generalized problem K phi = k Lambda phi
        k0, phi = scipy.linalg.eigh(K, Lam)
        Q = np.linalg.inv(phi).T
        D = 2 * zeta * Q @ np.diag(np.sqrt(k0)) @ Q.T
    F = K @ e + D @ (twist_d - J @ v)
    if feedforward:
        F += Lam @ (rate_d - jdv)
    tau0 = kn * (q_d - q) + dn * (qd_d - v)
    N_T = np.eye(7) - J.T @ Lam @ J @ Minv
    return h + J.T @ F + N_T @ tau0, D


@pytest.mark.parametrize("damping, coriolis, feedforward", [
    ([150.0, 200.0, 250.0, 8.0, 9.0, 10.0], True, True),
    (None, True, False),       # damping_ratio 0.8: D from the task-space inertia every cycle
    (None, False, True),
])
@pytest.mark.slow
def test_law_matches_an_independent_formulation_with_pinocchio(damping, coriolis, feedforward):
    path = rtctl.bundled_model_path("arm7")
    dyn = Dynamics(load_urdf(path))
    pm = pin.buildModelFromUrdf(str(path))
    pd = pm.createData()
    fid = pm.getFrameId("tool")
    full_k = np.array([[900, 30, 0, 0, 5, 0], [30, 1100, 20, 0, 0, 0], [0, 20, 1300, 0, 0, 2],
                       [0, 0, 0, 50, 1, 0], [5, 0, 0, 1, 60, 0], [0, 0, 2, 0, 0, 70]], dtype=float)
    zeta = None if damping is not None else 0.8
    ctl = CartesianImpedance(dyn, CartesianImpedance.Options(
        frame="tool", stiffness=full_k.reshape(36).tolist(), damping=damping, damping_ratio=zeta,
        nullspace_stiffness=[12.0, 11, 10, 9, 8, 7, 6], nullspace_damping=2.5, coriolis=coriolis,
        inertia_feedforward=feedforward))
    ctl.on_activate()
    K = task_matrix(full_k.reshape(36), "stiffness")
    D = None if damping is None else task_matrix(damping, "damping")
    rng = np.random.default_rng(11)
    effort = np.zeros(7)
    for _ in range(4):
        q = np.array(Q0) + rng.uniform(-0.3, 0.3, 7)
        q_d = q + rng.uniform(-0.05, 0.05, 7)
        v, qd_d, qdd_d = rng.uniform(-1, 1, 7), rng.uniform(-1, 1, 7), rng.uniform(-2, 2, 7)
        ctl.update(0.0, DT, q, v, q_d, qd_d, qdd_d, effort)
        ref, d_ref = pinocchio_effort(pm, pd, fid, q, v, q_d, qd_d, qdd_d, K, D, zeta, ctl.kp, ctl.kd, coriolis,
                                      feedforward)
        np.testing.assert_allclose(effort, ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())
        np.testing.assert_allclose(ctl.damping_matrix, d_ref, rtol=1e-9, atol=1e-9 * np.abs(d_ref).max())


def test_rotation_maps_agree_with_scipy_near_zero_and_near_pi():
    rng = np.random.default_rng(5)
    axes = rng.normal(size=(40, 3))
    axes /= np.linalg.norm(axes, axis=1)[:, None]
    angles = np.concatenate([[1e-9, 1e-7, 1e-5, math.pi - 1e-3, math.pi - 1e-5, math.pi - 1e-8],
                             rng.uniform(0, math.pi, 34)])
    for axis, angle in zip(axes, angles):
        w = angle * axis
        r = np.array(exp_rotation(*w)).reshape(3, 3)
        np.testing.assert_allclose(r, Rotation.from_rotvec(w).as_matrix(), atol=1e-14)
        back = np.array(log_rotation(*r.reshape(9)))
        np.testing.assert_allclose(back, w, atol=2e-7 if angle > math.pi - 1e-4 else 1e-12)


# -- the Cartesian minimum-jerk path ----------------------------------------------------------------
@pytest.mark.slow
def test_min_jerk_pose_path_ends_at_the_goal_and_its_twist_is_its_derivative():
    start_r = Rotation.from_rotvec([0.2, -0.4, 0.3]).as_matrix()
    start = np.concatenate([start_r.reshape(9), [0.4, -0.1, 0.6]])
    rpy = [0.3, -0.2, 1.0]
    tr = CartesianMinimumJerk(CartesianMinimumJerk.Options(duration=2.0, posture=Q0, goal_position=[0.5, 0.2, 0.4],
                                                           goal_rpy=rpy, delay=0.5))
    tr.anchor(1.0, start)
    pose, twist, rate = np.zeros(12), np.zeros(6), np.zeros(6)

    def at(t):
        tr.evaluate(t, pose, twist, rate)
        return pose.copy(), twist.copy(), rate.copy()
    p, w, a = at(1.5)                                     # the start: anchored at t = 1 + delay
    np.testing.assert_array_equal(p, start)
    assert not w.any() and not a.any()
    p, w, a = at(3.5)
    np.testing.assert_allclose(p[:9].reshape(3, 3), rpy_to_matrix(rpy), atol=1e-14)
    np.testing.assert_allclose(p[9:], [0.5, 0.2, 0.4], atol=1e-15)
    p, _, _ = at(2.5)                                     # mid-time: s = 1/2
    np.testing.assert_allclose(p[9:], (start[9:] + [0.5, 0.2, 0.4]) / 2, atol=1e-15)
    h = 1e-6
    for t in (1.9, 2.3, 3.1):
        p_plus, w_plus, _ = at(t + h)
        p_minus, w_minus, _ = at(t - h)
        _, w, a = at(t)
        omega = Rotation.from_matrix(p_plus[:9].reshape(3, 3) @ p_minus[:9].reshape(3, 3).T).as_rotvec() / (2 * h)
        np.testing.assert_allclose(np.concatenate([omega, (p_plus[9:] - p_minus[9:]) / (2 * h)]), w, atol=1e-8)
        np.testing.assert_allclose((w_plus - w_minus) / (2 * h), a, atol=1e-6)
    assert tr.peak_speeds()[0] == pytest.approx(1.875 * np.linalg.norm(np.subtract([0.5, 0.2, 0.4], start[9:])) / 2)


def track(feedforward):
    loop = arm_loop({"stiffness": [2000.0] * 3 + [100.0] * 3, "inertia_feedforward": feedforward},
                    {"type": "cartesian_min_jerk", "duration": 1.0, "offset": [0.0, 0.2, 0.0], "rotation": [0, 0, 0.3]})
    ctl = loop.controller
    rows = {"e": [], "lam": []}

    def hook(cycle, t, state, command):
        rows["e"].append(ctl.error.copy())
        rows["lam"].append(np.linalg.norm(ctl.task_inertia[3:, 3:], 2))
    loop.hooks.append(hook)
    report = loop.run(duration=1.5)
    assert not report.tripped, report.trip_reason
    e = np.array(rows["e"])
    # The run's report tracks what this law follows, the frame's pose, not the posture's joints.
    assert report.tracked_names[3:] == [f"{ctl.frame} {axis} (m)" for axis in "xyz"]
    np.testing.assert_array_equal(report.tracking_max, np.abs(e).max(axis=0))
    np.testing.assert_allclose(report.tracking_rms, np.sqrt((e * e).mean(axis=0)), rtol=1e-12)
    return e, np.array(rows["lam"])


@pytest.mark.slow
def test_cartesian_min_jerk_move_is_tracked_within_the_bound_of_a_critically_damped_spring():
    e, lam = track(feedforward=False)
    a_peak = 5.7735 * 0.2 / 1.0 ** 2                       # min-jerk peak acceleration 10 / sqrt(3) d / T^2
    bound = lam.max() * a_peak / 2000.0
    position_error = np.linalg.norm(e[:, 3:], axis=1)
    print(f"0.2 m in 1 s, K = 2000 N/m: max position error {position_error.max() * 1e3:.3f} mm (bound "
          f"{bound * 1e3:.2f} mm), max rotation error {np.linalg.norm(e[:, :3], axis=1).max() * 1e3:.2f} mrad, "
          f"at t = 1.5 s {position_error[-1] * 1e3:.4f} mm")
    assert position_error.max() < bound
    assert position_error.max() > 0.2 * bound                # the inertial lag is there: not a trivial pass
    assert position_error[-1] < 1e-4                         # settled 0.5 s after the end
    e_ff, _ = track(feedforward=True)
    assert np.linalg.norm(e_ff[:, 3:], axis=1).max() < 5e-5
    assert np.linalg.norm(e_ff[:, :3], axis=1).max() < 1e-4


# -- stiffness from the static displacement ----------------------------------------------------------
def measure_stiffness(loop, magnitudes, settle=3.0):
    """Per axis (user order x, y, z, rx, ry, rz): push the tool with ``magnitudes[i]`` along axis i alone,
    run ``settle`` s, and return (F / displacement per axis, the largest off-axis displacement relative to
    the on-axis one)."""
    measured, cross = np.zeros(6), 0.0
    for i, magnitude in enumerate(magnitudes):
        wrench = np.zeros(6)
        wrench[[3, 4, 5, 0, 1, 2][i]] = magnitude
        before = loop.controller.frame_pose(loop.state.q)
        hook = push(loop, wrench)
        loop.run(duration=settle)
        loop.boundary_hooks.remove(hook)
        loop.drivers[0].plant.set_external_wrench(None)
        moved = displacement(before, loop.controller.frame_pose(loop.state.q))[[3, 4, 5, 0, 1, 2]]
        measured[i] = magnitude / moved[i]
        cross = max(cross, np.abs(np.delete(moved, i)).max() / abs(moved[i]))
        loop.run(duration=settle)          # back to the set point before the next axis
    return measured, cross


@pytest.mark.slow
def test_stiffness_measured_from_the_displacement_under_a_known_wrench_matches_k(tmp_path):
    loop = arm_loop(trajectory={"type": "cartesian_min_jerk", "duration": 1.0})   # hold the start pose
    loop.run(duration=0.1)
    magnitudes = np.array(K_SET) * [0.01, 0.01, 0.01, 0.02, 0.02, 0.02]   # 1 cm, 0.02 rad
    measured, cross = measure_stiffness(loop, magnitudes)
    deviation = measured / K_SET - 1
    print("measured stiffness", np.round(measured, 4).tolist(), "deviation", np.round(deviation, 8).tolist(),
          "cross-axis", f"{cross:.2e}")
    assert np.abs(deviation).max() < 0.05
    assert cross < 0.01
    png = plot_stiffness(K_SET, measured, tmp_path / "stiffness.png")
    assert (tmp_path / "stiffness.png").stat().st_size > 10_000 and png.endswith(".png")


# -- live changes over the control channel ----------------------------------------------------------
@pytest.mark.slow
def test_set_impedance_changes_the_measured_stiffness_without_a_torque_step():
    loop = arm_loop(trajectory={"type": "cartesian_min_jerk", "duration": 1.0})
    server = ControlServer(loop, token=TOKEN)
    loop.run(duration=0.1)
    force = 12.0
    before = loop.controller.frame_pose(loop.state.q)
    push(loop, [0, 0, 0, force, 0, 0])
    efforts = []
    loop.hooks.append(lambda cycle, t, state, command: efforts.append(command.effort.copy()))
    loop.run(duration=3.0)
    first = displacement(before, loop.controller.frame_pose(loop.state.q))[3]
    new_k = [2400.0, 1200.0, 1600.0, 40.0, 60.0, 80.0]
    detail = server.apply_now({"cmd": "set_impedance", "stiffness": new_k})
    assert "stiffness=[2400.0" in detail and "0.1 s" in detail
    k_change = len(efforts)
    loop.run(duration=3.0)
    second = displacement(before, loop.controller.frame_pose(loop.state.q))[3]
    assert force / first == pytest.approx(K_SET[0], rel=1e-3)
    assert force / second == pytest.approx(new_k[0], rel=1e-3)
    # The blend: per cycle the torque moves by at most |J^T dK e| dt / gain_ramp (plus what the motion adds)
    steps = np.abs(np.diff(np.array(efforts[k_change - 5:k_change + 150]), axis=0)).max(axis=0)
    jac = loop.controller.dyn.jacobian(loop.state.q, "tool")
    full_step = np.abs(jac[3:].T @ np.array([(new_k[0] - K_SET[0]) * first, 0, 0]))
    print(f"largest torque change per cycle {steps.max():.4g} N m; the change of K at once would step "
          f"{full_step.max():.4g} N m")
    assert steps.max() <= 1.2 * full_step.max() * DT / 0.1, (steps, full_step)


@pytest.mark.slow
def test_a_damping_ratio_change_is_blended_like_stiffness_not_stepped():
    """D is built from zeta every cycle: a step in zeta (0.2 -> 2) was a 10 x step of D in one cycle. It moves
    over gain_ramp like K: one cycle in, D has moved by about dt / gain_ramp of the change."""
    loop = arm_loop(controller={"damping_ratio": 0.2})
    server = ControlServer(loop, token=TOKEN)
    loop.run(duration=0.1)
    before = np.linalg.norm(loop.controller.damping_matrix)
    assert "damping_ratio=2" in server.apply_now({"cmd": "set_impedance", "damping_ratio": 2.0})
    loop.run(cycles=1)
    one_cycle = np.linalg.norm(loop.controller.damping_matrix)
    loop.run(duration=0.15)
    after = np.linalg.norm(loop.controller.damping_matrix)
    assert after / before == pytest.approx(10.0, rel=0.02)
    assert one_cycle / before < 1.0 + 2 * 9.0 * DT / 0.1, (before, one_cycle, after)
    # The ramp ends on the new ratio exactly: a tiny one did not round to 0 (read as "explicit damping matrix")
    server.apply_now({"cmd": "set_impedance", "damping_ratio": 5e-324})
    loop.run(duration=0.15)
    assert loop.controller.impedance_limits()["damping_mode"] == "ratio"
    server.apply_now({"cmd": "set_impedance", "damping_ratio": 0.7})


@pytest.mark.slow
def test_a_nullspace_stiffness_change_is_blended_like_stiffness_not_stepped():
    """K_n through set_impedance moves linearly over gain_ramp (from the cycle that takes the change), ends on
    the new value exactly, and leaves set_gains' direct writes alone once done."""
    loop = arm_loop()
    server = ControlServer(loop, token=TOKEN)
    loop.run(duration=0.1)
    before = loop.controller.kp.copy()
    new = np.linspace(20.0, 80.0, 7)
    assert "nullspace_stiffness=[20.0" in server.apply_now({"cmd": "set_impedance", "nullspace_stiffness":
                                                            new.tolist()})
    loop.run(cycles=2)                                  # the ramp starts at the first cycle: w = 0, then dt / ramp
    np.testing.assert_allclose(loop.controller.kp, before + (new - before) * DT / 0.1, rtol=1e-12)
    loop.run(duration=0.15)
    assert loop.controller.kp.tolist() == new.tolist()
    server.apply_now({"cmd": "set_gains", "kp": [30.0] * 7})
    loop.run(cycles=2)
    assert loop.controller.kp.tolist() == [30.0] * 7


@pytest.fixture(scope="module")
def idle_server():
    loop = arm_loop()
    loop.step(0.0)
    return ControlServer(loop, token=TOKEN, apply_timeout=0.01)


@pytest.mark.parametrize("request_, reason", [
    ({"stiffness": [1000.0, float("nan"), 1000.0, 50.0, 50.0, 50.0]}, "stiffness[1]: must be finite, got nan"),
    ({"stiffness": [1000.0, 1000.0, 1000.0, 50.0, 50.0, -5.0]}, "stiffness[5] = -5 must be > 0"),
    ({"stiffness": (np.diag([1000.0] * 3 + [50.0] * 3) + 900.0 * np.eye(6, k=3) + 900.0 * np.eye(6, k=-3))
      .reshape(36).tolist()}, "stiffness is not positive definite (smallest eigenvalue"),
    ({"stiffness": (np.diag([1000.0] * 6) + np.eye(6, k=1)).reshape(36).tolist()}, "stiffness is not symmetric"),
    ({"stiffness": [9000.0, 1000.0, 1000.0, 50.0, 50.0, 50.0]}, "stiffness along x = 9000 exceeds stiffness_limit 5000"),
    ({"stiffness": [1000.0] * 5}, "stiffness: expected 6 values"),
    ({"damping": [100.0] * 6}, "sets D from damping_ratio"),
    ({"damping_ratio": float("inf")}, "damping_ratio: must be finite"),
    ({"nullspace_stiffness": 1e9}, "nullspace_stiffness[0] = 1e+09 outside the allowed range"),
    ({}, "set_impedance: give at least one of"),
    ({"stiffness": [1000.0] * 6, "token": TOKEN}, "token: the token is never sent"),
])
def test_bad_set_impedance_requests_are_refused_with_one_line_naming_the_field(idle_server, request_, reason):
    req = signed(idle_server, {"cmd": "set_impedance", **request_}, TOKEN)
    reply, _ = idle_server.handle_bytes(json.dumps(req).encode())
    assert reply["ok"] is False and reason in reply["error"], reply
    assert "\n" not in reply["error"]


def test_set_impedance_is_refused_for_a_controller_without_impedance_and_without_the_token():
    server = ControlServer(make_loop(), token=TOKEN, apply_timeout=0.01)   # computed_torque
    reply, _ = server.handle_bytes(msgpack.packb(signed(server, {"cmd": "set_impedance", "stiffness": [1e3] * 6},
                                                        TOKEN)))
    assert reply == {"ok": False, "error": "set_impedance: the loop's controller (computed_torque) is not an "
                                           "impedance controller"}
    reply, _ = server.handle_bytes(msgpack.packb({"cmd": "set_impedance", "stiffness": [1e3] * 6}))
    assert reply["ok"] is False and "set_impedance: needs the token" in reply["error"]


_number = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2 ** 70), 2 ** 70),
                    st.floats(min_value=0.1, max_value=6000.0), st.just(0.0), st.booleans(), st.text(max_size=3))
_values = st.one_of(_number, st.lists(_number, min_size=0, max_size=40), st.lists(st.lists(_number, max_size=3),
                                                                                    max_size=3))
_impedance_request = st.fixed_dictionaries({"cmd": st.just("set_impedance")}, optional={
    "token": st.sampled_from([TOKEN, "", "x" * 20]), "proof": st.sampled_from(["0" * 64, 7]), "stiffness": _values,
    "damping": _values,
    "damping_ratio": _number, "nullspace_stiffness": _values, "extra": _number})


@pytest.fixture(scope="module")
def running_server():
    loop = arm_loop(loop={"rate_hz": 500.0, "pace": True})
    server = ControlServer(loop, endpoint="tcp://127.0.0.1:0", token=TOKEN).start()
    th = run_in_background(loop, 60.0)
    sock = zmq.Context.instance().socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(server.endpoint)
    yield loop, server, sock
    sock.close(linger=0)
    loop.request_stop()
    th.join(15)
    server.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(request_=_impedance_request, encoding=st.sampled_from(["json", "msgpack"]), authenticated=st.booleans())
@pytest.mark.slow
def test_fuzzed_set_impedance_requests_are_answered_without_an_internal_error(running_server, request_, encoding,
                                                                            authenticated):
    _, server, sock = running_server
    if authenticated:               # as a client holding the token sends it: the checks after authentication
        handshake = ClientHandshake(TOKEN, server.endpoint)
        sock.send(msgpack.packb(handshake.hello()))
        assert sock.poll(3000)
        request_ = handshake.authenticate(msgpack.unpackb(sock.recv(), raw=False), request_)
    try:
        raw = json.dumps(request_).encode() if encoding == "json" else msgpack.packb(request_)
    except (ValueError, OverflowError, UnicodeEncodeError, TypeError):
        return
    sock.send(raw)
    assert sock.poll(3000), f"no reply to {request_!r}"
    reply = msgpack.unpackb(sock.recv(), raw=False) if encoding == "msgpack" else json.loads(sock.recv())
    assert "internal error" not in reply.get("error", ""), (request_, reply)
    assert server.alive


def test_estop_answers_within_10_ms_right_after_the_fuzz(running_server):
    loop, server, sock = running_server
    deadline = time.monotonic() + 30.0     # run alone (the fuzz before it deselected), the loop has just started
    while loop.cycle <= 100 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert loop.cycle > 100 and server.alive and not loop.failures
    reply = request(server.endpoint, {"cmd": "set_impedance", "stiffness": [1500.0] * 3 + [70.0] * 3}, token=TOKEN)
    assert reply["ok"], reply
    status = request(server.endpoint, {"cmd": "status"})
    assert status["limits"]["impedance"]["stiffness"] == [5000.0, 5000.0, 5000.0, 300.0, 300.0, 300.0]
    time.sleep(0.05)
    start = time.perf_counter()
    sock.send(msgpack.packb({"cmd": "estop", "reason": "after the set_impedance fuzz"}))
    assert sock.poll(1000)
    latency = time.perf_counter() - start
    reply = msgpack.unpackb(sock.recv(), raw=False)
    assert reply["ok"] and loop.safety.tripped
    assert latency < 0.010, f"e-stop answered in {latency * 1e3:.1f} ms"


# -- bad options --------------------------------------------------------------------------------------
@pytest.mark.parametrize("controller, trajectory, message", [
    ({"frame": "tol"}, None,
     "[controller] cartesian_impedance: frame: model 'arm7' has no link or frame named 'tol' (did you mean 'tool'"),
    ({"stiffness": [1000.0, 1000.0, 0.0, 50.0, 50.0, 50.0]}, None,
     "[controller] cartesian_impedance: stiffness is not positive definite (smallest eigenvalue 0)"),
    ({"stiffness": [1000.0, -1000.0, 1000.0, 50.0, 50.0, 50.0]}, None, "stiffness is not positive definite"),
    ({"stiffness": [1000.0] * 4}, None, "stiffness needs 6 values (x, y, z, rx, ry, rz) or 36"),
    ({"stiffness": [float("nan")] * 6}, None, "[controller] stiffness[0]: must be finite"),
    ({"damping": [100.0] * 6, "damping_ratio": 0.7}, None, "give damping or damping_ratio, not both"),
    ({"damping": [100.0, 100.0, 100.0, 10.0, 10.0, -1.0]}, None, "damping is not positive semi-definite"),
    ({"type": "computed_torque", "kp": 100.0, "frame": None, "stiffness": None},
     {"type": "cartesian_min_jerk", "duration": 1.0},
     "[trajectory] cartesian_min_jerk moves the frame of a Cartesian controller"),
    (None, {"type": "cartesian_min_jerk", "duration": 1.0, "offset": [0.1, 0.0, 0.0], "goal_position": [0, 0, 1]},
     "give goal_position or offset, not both"),
])
def test_bad_options_are_one_line_naming_the_key(controller, trajectory, message):
    raw = config(controller, trajectory)
    raw["controller"] = {k: v for k, v in raw["controller"].items() if v is not None}
    with pytest.raises(ConfigError) as info:
        build(validate(raw))
    assert message in str(info.value) and "\n" not in str(info.value), str(info.value)


def test_python_api_refuses_nan_and_a_floating_base():
    dyn = Dynamics(load_urdf(rtctl.bundled_model_path("arm7")))
    with pytest.raises(ValueError, match=r"^CartesianImpedance.Options stiffness\[1\]: must be finite, got nan$"):
        CartesianImpedance.Options(frame="tool", stiffness=[1000.0, math.nan, 1000.0, 50.0, 50.0, 50.0])
    floating = Dynamics(load_urdf(rtctl.bundled_model_path("arm7"), "free_flyer"))
    with pytest.raises(ValueError, match="needs a fixed-base model"):
        CartesianImpedance(floating, CartesianImpedance.Options(frame="tool", stiffness=[1000.0] * 3 + [50.0] * 3))
    ctl = CartesianImpedance(dyn, CartesianImpedance.Options(frame="tool", stiffness=[1000.0] * 3 + [50.0] * 3))
    q = np.array(Q0)
    with pytest.raises(ValueError, match="^cartesian_impedance: v contains NaN or inf$"):
        ctl.update(0.0, DT, q, np.full(7, np.nan), q, np.zeros(7), np.zeros(7), np.zeros(7))
    with pytest.raises(TypeError, match="^cartesian_impedance: a Cartesian reference is a CartesianReference "
                                        r"\(anchor\(\) and evaluate\(\)\); got MinimumJerk$"):
        ctl.follow(create_trajectory("min_jerk", start=Q0, goal=Q0, duration=1.0))   # a joint-space trajectory


def test_update_allocates_nothing_per_cycle():
    loop = arm_loop(trajectory={"type": "cartesian_min_jerk", "duration": 1.0, "offset": [0.05, 0.0, 0.0]})
    loop.run(duration=0.05)
    ctl, tr = loop.controller, loop.trajectory
    q, v = loop.state.q.copy(), loop.state.v.copy()
    q_d, qd_d, qdd_d, effort = np.zeros(7), np.zeros(7), np.zeros(7), np.zeros(7)
    tr.sample(0.3, q_d, qd_d, qdd_d)
    for k in range(50):
        ctl.update(0.3 + k * DT, DT, q, v, q_d, qd_d, qdd_d, effort)
    tracemalloc.start()
    try:
        first = tracemalloc.take_snapshot()
        for k in range(3000):
            tr.sample(0.4 + k * DT, q_d, qd_d, qdd_d)
            ctl.update(0.4 + k * DT, DT, q, v, q_d, qd_d, qdd_d, effort)
        second = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(s.size_diff for s in second.compare_to(first, "filename") if s.size_diff > 0)
    assert grown < 2000, f"{grown} B retained over 3000 cycles"


@pytest.mark.slow
def test_a_rearm_restarts_the_move_from_the_measured_pose_so_the_spring_starts_relaxed():
    loop = arm_loop(trajectory={"type": "cartesian_min_jerk", "duration": 1.0, "offset": [0.1, 0.0, 0.0]},
                    safety={"damping_gain": 100.0})         # N m s/rad: the arm sags slowly in the safe state
    ctl = loop.controller
    loop.run(duration=0.4)
    loop.safety.estop("test: mid-move")
    loop.run(duration=0.3)
    assert loop.rearm().startswith("re-armed")
    loop.run(cycles=1)
    rearmed = ctl.pose.copy()
    assert np.abs(ctl.error).max() < 1e-12                  # anchored where it is: no stretched spring
    loop.run(duration=3.0)                                  # the move, and the re-arm's velocity settled
    assert not loop.safety.tripped
    np.testing.assert_allclose(ctl.pose[9:] - rearmed[9:], [0.1, 0.0, 0.0], atol=1e-4)
