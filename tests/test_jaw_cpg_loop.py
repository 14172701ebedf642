"""The chewing CPG driving the jaw robot (issue 8): smooth leg trajectories under online changes,
therapist limits on the control channel, and a closed-loop session on the two-platform plant."""
from __future__ import annotations


import numpy as np
import pytest

from rtctl.plants.jaw.cpg_trajectory import JawCPGTrajectory
from rtctl.cli import main
from rtctl.config import ConfigError, build, load_config, bundled_config_path

EXAMPLE = bundled_config_path("jaw")
DT = 1e-3


def sample_run(traj, t_end, change=None):
    """Leg trajectories at 1 kHz; ``change = (t, request)`` goes through the control-channel path."""
    n = int(round(t_end / DT))
    q, qd, qdd = np.zeros((n, 6)), np.zeros((n, 6)), np.zeros((n, 6))
    for k in range(n):
        t = k * DT
        if change is not None and abs(t - change[0]) < DT / 2:
            apply, _ = traj.validate_cpg_request(change[1])
            apply(None)
        traj.sample(t, q[k], qd[k], qdd[k])
    return q, qd, qdd


@pytest.mark.parametrize("request_, label", [({"frequency": 1.5}, "frequency 1.0 -> 1.5 Hz"),
                                             ({"amplitude": 1.5}, "amplitude x1.5"),
                                             ({"frequency": 1.5, "amplitude": 1.5}, "both"),
                                             ({"pattern": "hard_food"}, "pattern switch")])
def test_leg_trajectories_stay_smooth_through_online_changes(request_, label):
    """Leg position, velocity and acceleration stay continuous and the peak leg jerk during the
    transition stays within 2x the larger of the steady-state peaks before and after it."""
    traj = JawCPGTrajectory(JawCPGTrajectory.Options(pattern="normal", frequency=1.0), limits={"max_frequency": 2.0,
                                                     "max_speed": 0.25})
    q, qd, qdd = sample_run(traj, 14.0, change=(6.0, request_))
    t = np.arange(q.shape[0]) * DT
    # numeric identities: the rates are the derivatives of the lengths (central differences, O(dt^2))
    assert np.allclose(np.gradient(q, DT, axis=0)[1:-1], qd[1:-1], atol=2e-5)
    assert np.allclose(np.gradient(qd, DT, axis=0)[1:-1], qdd[1:-1], atol=2e-4)
    jerk = np.abs(np.diff(qdd, axis=0)) / DT
    steady_before = jerk[(t[1:] > 3.0) & (t[1:] < 6.0)].max()
    steady_after = jerk[t[1:] > 11.0].max()
    transition = jerk[(t[1:] >= 6.0) & (t[1:] < 11.0)].max()
    assert transition <= 2.0 * max(steady_before, steady_after), label
    # no discontinuity at the change: the per-step changes there are like those of steady chewing
    k = int(round(6.0 / DT))
    for name, x in (("q", q), ("qd", qd), ("qdd", qdd)):
        step = np.abs(np.diff(x, axis=0))
        assert step[k - 2:k + 3].max() <= 1.5 * step[int(3.0 / DT):k - 10].max(), (label, name)


def test_the_legs_follow_the_cpg_incisal_point_through_the_mechanism():
    traj = JawCPGTrajectory(JawCPGTrajectory.Options(pattern="lateral_grinding", t0=0.2))
    m = traj.mechanism
    q, qd, qdd = np.zeros(6), np.zeros(6), np.zeros(6)
    traj.sample(0.1, q, qd, qdd)
    assert np.allclose(q, traj.rest_legs) and not qd.any()   # holds the rest pose before t0
    for k in range(201, 2500):
        traj.sample(k * DT, q, qd, qdd)
    p, pd, pdd = traj.incisal[:3]
    x, xd, xdd = m.incisal_pose(p, pd, pdd)
    assert np.allclose(q, m.robot.leg_lengths(x), atol=1e-12)
    assert np.allclose(m.incisal_point(x), p, atol=1e-12)
    assert np.linalg.norm(p) > 1e-3


def _loop(tmp_path, **edits):
    text = EXAMPLE.read_text()
    for old, new in edits.items():
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / "jaw.toml"
    path.write_text(text)
    cfg = load_config(path)
    cfg["loop"]["pace"] = False
    return build(cfg)


def test_therapist_limits_refuse_requests_on_the_control_channel(tmp_path):
    from rtctl.operator.control import ControlServer, Refused
    loop = _loop(tmp_path)
    server = ControlServer(loop)
    cases = [({"cmd": "set_cpg", "frequency": 2.5}, "frequency"),
             ({"cmd": "set_cpg", "amplitude": 3.0}, "opening"),
             ({"cmd": "set_cpg", "pattern": "tango"}, "unknown pattern"),
             ({"cmd": "set_cpg", "center": [0.0] * 6}, "does not apply to the chewing CPG")]
    for req, reason in cases:
        with pytest.raises(Refused, match=reason):
            server.apply_now(req)
    before = loop.trajectory.cpg.targets
    assert server.apply_now({"cmd": "set_cpg", "frequency": 1.4, "amplitude": [1.2, 1.0, 1.2]})
    after = loop.trajectory.cpg.targets
    assert after != before and loop.trajectory.cpg.target_frequency == pytest.approx(1.4)


@pytest.mark.slow
def test_therapist_max_force_lowers_the_effort_clamp(tmp_path):
    loop = _loop(tmp_path, **{"max_force = 60.0": "max_force = 3.0"})
    assert np.all(loop.model.effort_limit == 3.0)
    report = loop.run(duration=2.0)
    assert loop.safety.clamp_count > 0 and not report.tripped


def test_bad_jaw_config_values_are_named(tmp_path):
    with pytest.raises(ConfigError, match=r"\[trajectory\] frequency: the chewing CPG has one frequency"):
        _loop(tmp_path, **{'pattern = "normal"               # 1.25 Hz, 17 mm opening':
                           'pattern = "normal"\nfrequency = [1.0, 1.2]'})
    with pytest.raises(ConfigError, match=r"\[\[schedule\]\] 0 \(t = 15 s\): .*frequency"):
        _loop(tmp_path, **{"frequency = 1.5                  # Hz (from 1.25)": "frequency = 3.0"})
    with pytest.raises(ConfigError, match=r"\[patient\] .*bolus_band"):
        _loop(tmp_path, **{"bolus_band = [-0.010, 0.0]": "bolus_band = [0.0, -0.010]"})


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    from rtctl.config import session_loop
    from rtctl.plants.jaw.session import run_session
    cfg = load_config(EXAMPLE)
    cfg["schedule"][0]["t"] = 5.0
    cfg["schedule"][1]["t"] = 9.0
    return run_session(*session_loop(cfg, duration=12.0), tmp_path_factory.mktemp("jaw"))


@pytest.mark.slow
def test_closed_loop_session_tracks_through_the_changes(session):
    """Gibbs-Appell computed torque on the two-platform plant with unmodelled leg friction and food bolus:
    leg tracking error below 1 mm (0.3 mm RMS) in every phase, transitions included; forces below the
    therapist's limit; no trip."""
    assert not session.report.tripped
    names = [p[0] for p in session.phases]
    assert any(n.startswith("transition (frequency=1.5, amplitude=1.5)") for n in names)
    assert any(n.startswith("transition (pattern=lateral_grinding)") for n in names)
    for name, t0, t1, rms, mx, force in session.phases:
        assert rms < 0.3e-3 and mx < 1.0e-3, name
        assert force < 60.0, name
    assert {p.name for p in session.files} == {"session.npz", "legs.png", "incisal.png"}
    data = np.load(next(p for p in session.files if p.name == "session.npz"))
    opening = -data["incisal_desired"][:, 2]
    t = data["t"]
    assert opening[(t > 6.5) & (t < 9.0)].max() > 1.3 * opening[(t > 2.0) & (t < 5.0)].max()   # x1.5 on z


@pytest.mark.slow
def test_jaw_session_cli(tmp_path, capsys):
    assert main(["jaw-session", str(EXAMPLE), "--out", str(tmp_path), "--duration", "1.0"]) == 0
    out = capsys.readouterr().out
    assert "RMS err (mm)" in out and (tmp_path / "legs.png").stat().st_size > 10_000
