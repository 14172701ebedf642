"""Trajectory generators of :mod:`loops.trajectories`: exact boundary conditions, derivatives
consistent with finite differences, spline continuity, holding, validation, no allocation."""
import math
import textwrap
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from scipy.interpolate import CubicSpline

from rtctl.loops import CubicSplineTrajectory, MinimumJerk, Sinusoid, Trajectory, create_trajectory

from allocation_counter import run_with_allocation_counters

LOOPS_DIR = str(Path(__file__).resolve().parent.parent / "loops")

START = np.array([0.2, -1.0, 0.0, 3.0])
GOAL = np.array([1.0, 0.5, 0.0, -2.0])
TIMES = np.array([0.5, 1.0, 1.8, 2.2, 3.5])
WAYPOINTS = np.array([[0.0, 1.0, -0.5], [0.7, 0.2, -0.1], [0.3, -0.4, 0.6], [0.9, 0.0, 0.2], [0.1, 0.5, -0.3]])


def sample(traj, t):
    q, qd, qdd = np.empty(traj.n), np.empty(traj.n), np.empty(traj.n)
    traj.sample(t, q, qd, qdd)
    return q, qd, qdd


def all_trajectories():
    return [
        MinimumJerk(MinimumJerk.Options(start=START, goal=GOAL, duration=1.5, t0=0.25)),
        CubicSplineTrajectory(CubicSplineTrajectory.Options(times=TIMES, waypoints=WAYPOINTS, boundary="clamped")),
        CubicSplineTrajectory(CubicSplineTrajectory.Options(times=TIMES, waypoints=WAYPOINTS, boundary="natural")),
        Sinusoid(Sinusoid.Options(center=[0.1, -0.2, 0.0], amplitude=[0.5, 0.25, 1.0], frequency=[0.5, 2.0, 1.3],
                                  phase=[0.0, 1.0, -2.0])),
    ]


# -- minimum jerk -------------------------------------------------------------------
def test_min_jerk_boundaries_are_exact():
    traj = MinimumJerk(MinimumJerk.Options(start=START, goal=GOAL, duration=1.5, t0=0.25))
    assert traj.n == 4 and traj.duration == 1.5 and isinstance(traj, Trajectory)
    for t, end in ((0.25, START), (1.75, GOAL), (-3.0, START), (0.0, START), (2.0, GOAL), (1e9, GOAL)):
        q, qd, qdd = sample(traj, t)
        np.testing.assert_array_equal(q, end)
        np.testing.assert_array_equal(qd, 0.0)
        np.testing.assert_array_equal(qdd, 0.0)


def test_min_jerk_profile_values():
    traj = MinimumJerk(MinimumJerk.Options(start=START, goal=GOAL, duration=2.0))
    q, qd, qdd = sample(traj, 1.0)  # mid-time: half way, peak velocity 1.875 d / T, zero acceleration
    np.testing.assert_allclose(q, 0.5 * (START + GOAL), atol=1e-15)
    np.testing.assert_allclose(qd, 1.875 * (GOAL - START) / 2.0, rtol=1e-14)
    np.testing.assert_allclose(qdd, 0.0, atol=1e-14)
    tau = 0.3
    q, qd, qdd = sample(traj, 2.0 * tau)
    s = 10 * tau**3 - 15 * tau**4 + 6 * tau**5
    np.testing.assert_allclose(q, START + (GOAL - START) * s, rtol=1e-14, atol=1e-15)
    # Symmetric profile: the velocity at tau and 1 - tau agree, the accelerations are opposite.
    _, qd2, qdd2 = sample(traj, 2.0 * (1 - tau))
    np.testing.assert_allclose(qd2, qd, rtol=1e-12)
    np.testing.assert_allclose(qdd2, -qdd, rtol=1e-12)


# -- derivatives ----------------------------------------------------------------------
@pytest.mark.parametrize("traj", all_trajectories(), ids=lambda tr: type(tr).__name__ + getattr(tr, "boundary", ""))
def test_derivatives_match_central_differences(traj):
    h = 1e-6
    if isinstance(traj, CubicSplineTrajectory):
        lo, hi = traj.times[0], traj.times[-1]
    elif isinstance(traj, MinimumJerk):
        lo, hi = traj.t0, traj.t0 + traj.duration
    else:
        lo, hi = 0.0, 4.0
    rng = np.random.default_rng(3)
    times = np.concatenate([rng.uniform(lo + 2 * h, hi - 2 * h, 40), [lo + 0.5 * (hi - lo)]])
    if isinstance(traj, CubicSplineTrajectory):  # straddling interior knots: still C2
        times = np.concatenate([times, traj.times[1:-1]])
    for t in times:
        q, qd, qdd = sample(traj, t)
        qp, qdp, _ = sample(traj, t + h)
        qm, qdm, _ = sample(traj, t - h)
        scale = 1.0 + np.abs(q).max()
        slack = 0.0
        if isinstance(traj, CubicSplineTrajectory) and t in traj.times:
            # The jerk 6 c0 jumps at a knot: the central difference of qd is off by h/4 times the jump.
            i = int(np.searchsorted(traj.times, t))
            slack = 0.25 * h * 6.0 * np.abs(traj.coefficients[0, i] - traj.coefficients[0, i - 1]) * 1.01
        np.testing.assert_allclose((qp - qm) / (2 * h), qd, atol=1e-7 * scale, err_msg=f"qd at t={t}")
        np.testing.assert_array_less(np.abs((qdp - qdm) / (2 * h) - qdd), 1e-6 * scale + slack,
                                     err_msg=f"qdd at t={t}")


# -- spline ---------------------------------------------------------------------------
@pytest.mark.parametrize("boundary", ["clamped", "natural"])
def test_spline_passes_through_waypoints_and_matches_scipy(boundary):
    traj = CubicSplineTrajectory(CubicSplineTrajectory.Options(times=TIMES, waypoints=WAYPOINTS, boundary=boundary))
    assert traj.n == 3 and traj.duration == pytest.approx(3.0)
    for t, wp in zip(TIMES, WAYPOINTS):
        q, _, _ = sample(traj, t)
        np.testing.assert_array_equal(q, wp)
    ref = CubicSpline(TIMES, WAYPOINTS, bc_type=boundary)
    for t in np.linspace(TIMES[0], TIMES[-1], 97):
        q, qd, qdd = sample(traj, t)
        np.testing.assert_allclose(q, ref(t), rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(qd, ref(t, 1), rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(qdd, ref(t, 2), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("boundary", ["clamped", "natural"])
def test_spline_boundary_conditions_exact(boundary):
    traj = CubicSplineTrajectory(CubicSplineTrajectory.Options(times=TIMES, waypoints=WAYPOINTS, boundary=boundary))
    for t in (TIMES[0], TIMES[-1]):
        _, qd, qdd = sample(traj, t)
        if boundary == "clamped":
            np.testing.assert_array_equal(qd, 0.0)
            assert np.abs(qdd).max() > 0.1
        else:
            np.testing.assert_array_equal(qdd, 0.0)
            assert np.abs(qd).max() > 0.1


@pytest.mark.parametrize("boundary", ["clamped", "natural"])
def test_spline_is_c2_at_interior_knots(boundary):
    traj = CubicSplineTrajectory(CubicSplineTrajectory.Options(times=TIMES, waypoints=WAYPOINTS, boundary=boundary))
    c, x = traj.coefficients, traj.times
    for i in range(1, len(x) - 1):
        h = x[i] - x[i - 1]
        a, b, cc, d = c[:, i - 1]  # left piece evaluated at its right end
        left = (((a * h + b) * h + cc) * h + d, (3 * a * h + 2 * b) * h + cc, 6 * a * h + 2 * b)
        right = sample(traj, x[i])
        for k in range(3):
            np.testing.assert_allclose(left[k], right[k], rtol=1e-12, atol=1e-12, err_msg=f"knot {i}, order {k}")
        # and through sample(): the jump across the knot vanishes with the step
        below, above = sample(traj, x[i] - 1e-9), sample(traj, x[i] + 1e-9)
        for k in range(3):
            np.testing.assert_allclose(below[k], above[k], atol=1e-6)


def test_spline_holds_end_points_outside_the_range():
    traj = CubicSplineTrajectory(CubicSplineTrajectory.Options(times=TIMES, waypoints=WAYPOINTS, boundary="natural"))
    for t, wp in ((TIMES[0] - 1e-12, WAYPOINTS[0]), (-100.0, WAYPOINTS[0]),
                  (TIMES[-1] + 1e-12, WAYPOINTS[-1]), (1e6, WAYPOINTS[-1])):
        q, qd, qdd = sample(traj, t)
        np.testing.assert_array_equal(q, wp)
        np.testing.assert_array_equal(qd, 0.0)
        np.testing.assert_array_equal(qdd, 0.0)


def test_spline_two_waypoints_and_single_joint():
    traj = CubicSplineTrajectory(CubicSplineTrajectory.Options(times=[0.0, 2.0], waypoints=[[0.0], [1.0]]))
    assert traj.n == 1
    q, qd, qdd = sample(traj, 1.0)
    np.testing.assert_allclose(q, [0.5])
    np.testing.assert_allclose(qd, [0.75])  # clamped cubic: 3 d / (2 T)
    np.testing.assert_allclose(qdd, [0.0], atol=1e-15)


# -- sinusoid -------------------------------------------------------------------------
def test_sinusoid_values_and_broadcasting():
    traj = Sinusoid(Sinusoid.Options(center=[1.0, 2.0], amplitude=0.5, frequency=2.0, phase=0.25))
    assert traj.n == 2 and traj.duration == math.inf
    t = 0.37
    w = 2 * np.pi * 2.0
    q, qd, qdd = sample(traj, t)
    np.testing.assert_allclose(q, np.array([1.0, 2.0]) + 0.5 * np.sin(w * t + 0.25), rtol=1e-15)
    np.testing.assert_allclose(qd, 0.5 * w * np.cos(w * t + 0.25), rtol=1e-14)
    np.testing.assert_allclose(qdd, -0.5 * w * w * np.sin(w * t + 0.25), rtol=1e-14)
    q, qd, qdd = sample(Sinusoid(Sinusoid.Options(center=[0.0], amplitude=[1.0], frequency=[1.0])), 0.0)
    assert q[0] == 0.0 and qd[0] == pytest.approx(2 * np.pi) and qdd[0] == 0.0


# -- factory and validation ---------------------------------------------------------
def test_create_trajectory_kinds():
    assert isinstance(create_trajectory("min_jerk", start=[0, 0], goal=[1, 1], duration=1.0), MinimumJerk)
    spline = create_trajectory("spline", times=TIMES, waypoints=WAYPOINTS, boundary="natural")
    assert isinstance(spline, CubicSplineTrajectory) and spline.boundary == "natural"
    assert isinstance(create_trajectory("sinusoid", center=[0], amplitude=1, frequency=1), Sinusoid)
    with pytest.raises(ValueError, match="unknown trajectory 'jerk'.*min_jerk"):
        create_trajectory("jerk", start=[0], goal=[1], duration=1.0)
    with pytest.raises(ValueError, match="MinimumJerk.Options: goal is required"):
        create_trajectory("min_jerk", start=[0], duration=1.0)
    with pytest.raises(ValueError, match="spline.*speed"):
        create_trajectory("spline", times=TIMES, waypoints=WAYPOINTS, speed=2)


MJ, SPLINE, SIN = MinimumJerk, CubicSplineTrajectory, Sinusoid


# What the schema says is refused by the Options, naming the class, the field and the value; what needs the
# other fields (lengths, ordering) by the trajectory.
@pytest.mark.parametrize("make, match", [
    (lambda: MJ(MJ.Options(start=[0, 1], goal=[1], duration=1.0)), r"goal must have length 2, got 1"),
    (lambda: MJ.Options(start=[], goal=[], duration=1.0), r"^MinimumJerk.Options start: empty list$"),
    (lambda: MJ.Options(start=[[0, 1]], goal=[[1, 2]], duration=1.0),
     r"^MinimumJerk.Options start\[0\]: expected a number, got \[0, 1\]$"),
    (lambda: MJ.Options(start=[0], goal=[1], duration=0.0), r"^MinimumJerk.Options duration: must be > 0, got 0\.0$"),
    (lambda: MJ.Options(start=[0], goal=[1], duration=-2), r"duration: must be > 0, got -2$"),
    (lambda: MJ.Options(start=[0], goal=[1], duration=float("inf")), r"duration: must be finite, got inf$"),
    (lambda: MJ.Options(start=[0], goal=[np.nan], duration=1.0), r"goal\[0\]: must be finite, got nan$"),
    (lambda: MJ.Options(start=[0], goal=[1], duration=1.0, t0=np.nan), r"t0: must be finite, got nan$"),
    (lambda: MJ.Options(start=["a"], goal=[1], duration=1.0), r"start\[0\]: expected a number, got 'a'$"),
    (lambda: MJ.Options(start=[0], goal=[1], duration="slow"), r"duration: expected a number, got 'slow'$"),
    (lambda: MJ(MJ.Options(goal=[1], duration=1.0)), r"start is required"),
    (lambda: SPLINE(SPLINE.Options(times=[0, 1, 1], waypoints=[[0], [1], [2]])),
     r"times must be strictly increasing.*times\[2\]"),
    (lambda: SPLINE(SPLINE.Options(times=[0, 2, 1], waypoints=[[0], [1], [2]])), r"times must be strictly increasing"),
    (lambda: SPLINE(SPLINE.Options(times=[0], waypoints=[[0]])), r"times must hold at least 2 values"),
    (lambda: SPLINE(SPLINE.Options(times=[0, 1, 2], waypoints=[[0, 1], [1, 2]])), r"waypoints must have 3 rows"),
    (lambda: SPLINE.Options(times=[0, 1], waypoints=[[0, np.inf], [1, 2]]),
     r"^CubicSplineTrajectory.Options waypoints\[0\]\[1\]: must be finite, got inf$"),
    (lambda: SPLINE.Options(times=[0, np.nan], waypoints=[[0], [1]]), r"times\[1\]: must be finite, got nan$"),
    (lambda: SPLINE.Options(times=[0, 1], waypoints=[[0], [1]], boundary="periodic"),
     r"boundary: must be one of \['clamped', 'natural'\], got 'periodic'$"),
    (lambda: SIN(SIN.Options(center=[0, 0], amplitude=[1, 1, 1], frequency=1.0)),
     r"amplitude must have length 2, got 3"),
    (lambda: SIN.Options(center=[0], amplitude=1.0, frequency=-1.0), r"^Sinusoid.Options frequency\[0\]: must be > 0, "
                                                                     r"got -1\.0$"),
    (lambda: SIN.Options(center=[0], amplitude=1.0, frequency=np.inf), r"frequency\[0\]: must be finite, got inf$"),
    (lambda: SIN.Options(center=[0], amplitude=1.0, frequency=1.0, phase=np.nan), r"phase\[0\]: must be finite"),
])
def test_constructors_reject_bad_parameters(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_sample_rejects_bad_outputs_and_time():
    traj = MinimumJerk(MinimumJerk.Options(start=[0.0, 1.0], goal=[1.0, 0.0], duration=1.0))
    q, qd, qdd = np.zeros(2), np.zeros(2), np.zeros(2)
    with pytest.raises(ValueError, match=r"qdd must have shape \(2,\)"):
        traj.sample(0.5, q, qd, np.zeros(3))
    with pytest.raises(ValueError, match=r"q must be a writable C-contiguous float64"):
        traj.sample(0.5, [0.0, 0.0], qd, qdd)
    with pytest.raises(ValueError, match=r"qd must be a writable C-contiguous float64"):
        traj.sample(0.5, q, np.zeros(2, dtype=np.float32), qdd)
    with pytest.raises(ValueError, match=r"qd must be a writable C-contiguous float64"):
        traj.sample(0.5, q, np.zeros(4)[::2], qdd)
    with pytest.raises(ValueError, match=r"t must be finite, got nan"):
        traj.sample(float("nan"), q, qd, qdd)
    with pytest.raises(ValueError, match=r"t must be a number"):
        traj.sample("now", q, qd, qdd)
    traj.sample(np.float64(0.5), q, qd, qdd)  # numpy scalars and ints are fine
    traj.sample(1, q, qd, qdd)
    np.testing.assert_array_equal(q, [1.0, 0.0])


# -- allocation ---------------------------------------------------------------------
@pytest.mark.parametrize("traj", all_trajectories(), ids=lambda tr: type(tr).__name__ + getattr(tr, "boundary", ""))
def test_sample_allocates_nothing(traj):
    q, qd, qdd = np.empty(traj.n), np.empty(traj.n), np.empty(traj.n)
    times = [float(t) for t in np.linspace(-1.0, 5.0, 500)]
    traj.sample(0.3, q, qd, qdd)  # warm up
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        for t in times:
            traj.sample(t, q, qd, qdd)
        peak = tracemalloc.get_traced_memory()[1] - base
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    growth = [s for s in after.compare_to(before, "filename")
              if s.traceback[0].filename.startswith(LOOPS_DIR) and (s.size_diff > 0 or s.count_diff > 0)]
    assert not growth, growth
    assert peak < 1024, f"{peak} B transient allocation over 500 calls"


NRT_SCRIPT = textwrap.dedent("""
    import numpy as np
    from numba import njit
    from numba.core.runtime import rtsys
    from rtctl.loops import trajectories as tj

    @njit
    def cycles(n, mj, sp, sn, q, qd, qdd):
        bad = 0
        for k in range(n):
            t = -0.5 + 0.01 * k
            bad += tj._min_jerk_sample(t, *mj, q, qd, qdd)
            bad += tj._spline_sample(t, *sp, q, qd, qdd)
            bad += tj._sinusoid_sample(t, *sn, q, qd, qdd)
        return bad

    mj = tj.MinimumJerk(tj.MinimumJerk.Options(start=[0, 1, 2], goal=[1, 2, 0], duration=2.0))
    sp = tj.CubicSplineTrajectory(tj.CubicSplineTrajectory.Options(times=[0, 1, 3],
                                                                    waypoints=[[0, 1, 2], [1, 0, 1], [2, 2, 2]]))
    sn = tj.Sinusoid(tj.Sinusoid.Options(center=[0, 1, 2], amplitude=1.0, frequency=2.0))
    args = (mj._args, sp._args, sn._args, np.zeros(3), np.zeros(3), np.zeros(3))
    assert cycles(1, *args) == 0
    counts = allocations(cycles, *args)
    assert counts[0] == counts[1], counts
    print("OK", counts)
""")


@pytest.mark.slow
def test_compiled_kernels_allocate_nothing_per_call():
    out = run_with_allocation_counters(NRT_SCRIPT)
    assert out.strip().startswith("OK")


# -- excitation on robots with continuous joints; errors that name joints -----------------------------------------
KINOVA_START = [0.5, 2.9, 1.3, -2.0, 1.4, -0.3]       # joints 1, 4 and 6 are continuous (no position limits)


def kinova_config(trajectory):
    from identification_helpers import example_robot_data

    return {"robot": {"model": example_robot_data("kinova_description/robots/kinova.urdf")},
            "plant": {"initial_position": KINOVA_START},
            "controller": {"type": "computed_torque", "kp": 100.0}, "trajectory": trajectory, "loop": {"pace": False}}


@pytest.mark.parametrize("unlimited_range", [None, 0.4])
def test_an_excitation_moves_continuous_joints_within_a_range_about_their_start(unlimited_range):
    """The Kinova arm's continuous joints were refused ('ExcitationTrajectory: lower must be finite, got array([
    -inf, 0.92, 0.43, -inf, 0.62, -inf])'); they now move within unlimited_range (default pi) of their start, and
    every joint is scaled to the largest series that fits its range, velocity and acceleration limits."""
    from rtctl.config import build, validate
    from rtctl.model.urdf import load_urdf

    trajectory = {"type": "excitation", "frequency": 0.1, "acceleration_limit": 2.0, "optimise": False}
    if unlimited_range is not None:
        trajectory["unlimited_range"] = unlimited_range
    cfg = kinova_config(trajectory)
    excitation = build(validate(cfg)).trajectory
    model = load_urdf(cfg["robot"]["model"])
    continuous = ~np.isfinite(model.lower)
    assert continuous.tolist() == [True, False, False, True, False, True]
    half = np.pi if unlimited_range is None else unlimited_range
    start = np.asarray(KINOVA_START)
    np.testing.assert_allclose(excitation.lower[continuous], start[continuous] - half, rtol=0, atol=1e-15)
    np.testing.assert_allclose(excitation.upper[continuous], start[continuous] + half, rtol=0, atol=1e-15)
    np.testing.assert_allclose(excitation.lower[~continuous], model.lower[~continuous] + 0.1, rtol=0, atol=1e-15)
    low, high, velocity, acceleration = excitation.peaks()
    print(f"range {half:.3g} rad: continuous joints swing {(high - low)[continuous]} rad")
    assert np.all(low >= excitation.lower - 1e-12) and np.all(high <= excitation.upper + 1e-12)
    reached = (np.isclose(velocity, model.velocity_limit, rtol=1e-9) | np.isclose(acceleration, 2.0, rtol=1e-9)
               | np.isclose(low, excitation.lower, rtol=0, atol=1e-9)
               | np.isclose(high, excitation.upper, rtol=0, atol=1e-9))
    assert np.all(reached) and np.all(high - low > 0.2)


@pytest.mark.parametrize("trajectory, message", [
    ({"type": "min_jerk", "goal": [0.0, 3.0, 1.4, -2.0, 1.5], "duration": 2.0}, "goal must have 6 values"),
    ({"type": "sinusoid", "center": KINOVA_START, "amplitude": [0.1] * 5, "frequency": 0.2},
     "amplitude must have 6 values"),
    ({"type": "spline", "times": [0.0, 1.0], "waypoints": [KINOVA_START[:5], KINOVA_START[:5]]},
     "waypoints must have 6 columns"),
    ({"type": "excitation", "acceleration_limit": 2.0, "velocity_limit": [0.5] * 5, "optimise": False},
     "velocity_limit: expected 6 values (one per actuated joint), got 5"),
])
def test_a_trajectory_of_the_wrong_size_is_refused_naming_the_joints(trajectory, message):
    """One line naming the file, the section, the key and the robot's joints; never a class and an array."""
    from rtctl.config import build, validate
    from rtctl.options import ConfigError

    with pytest.raises(ConfigError) as err:
        build(validate(kinova_config(trajectory)))
    text = str(err.value)
    print(text)
    assert text.startswith("<config>: [trajectory] ") and message in text and "\n" not in text
    assert "array(" not in text and "Trajectory" not in text and "Sinusoid" not in text
    if "one per actuated joint (" in text:
        assert "(j2s6s200_joint_1, j2s6s200_joint_2, j2s6s200_joint_3, j2s6s200_joint_4, j2s6s200_joint_5, " \
               "j2s6s200_joint_6)" in text


def test_an_excitations_bad_entry_names_its_joint():
    """Built from Python with joint names (as from a config), a non-finite or non-positive entry names its joint;
    without names, its index."""
    from rtctl.loops.excitation import ExcitationTrajectory

    names = ["a", "b", "c"]
    coefficients = np.ones((3, 6))
    with pytest.raises(ValueError, match=r"^lower: joint 'b' is -inf; must be finite$"):
        ExcitationTrajectory(np.zeros(3), [-1.0, -np.inf, -1.0], 1.0, 1.0, 1.0, 0.2, coefficients, joint_names=names)
    with pytest.raises(ValueError, match=r"^acceleration_limit: joint 'c' is -2; must be > 0$"):
        ExcitationTrajectory(np.zeros(3), -1.0, 1.0, 1.0, [1.0, 1.0, -2.0], 0.2, coefficients, joint_names=names)
    with pytest.raises(ValueError, match=r"^start: joint 'a' is 1, not strictly inside \[lower, upper\] = \[-1, 1\]$"):
        ExcitationTrajectory([1.0, 0.0, 0.0], -1.0, 1.0, 1.0, 1.0, 0.2, coefficients, joint_names=names)
    with pytest.raises(ValueError, match=r"^ExcitationTrajectory: acceleration_limit\[2\] is -2; must be > 0$"):
        ExcitationTrajectory(np.zeros(3), -1.0, 1.0, 1.0, [1.0, 1.0, -2.0], 0.2, coefficients)
