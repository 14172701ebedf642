"""Bite force against the therapist's limit and the patient impedance identified online (plants/jaw/bite.py).

Identification: on the simulated robot + jaw model + patient (exact mechanism model, no leg friction), a
patient with stiffness and damping other than the nominal ones, moved on every pose coordinate by a
leg-space multi-sine, is identified by the RLS to within 0.5 %. Bite limit: chewing a simulated bolus
(2 Hz open-close through the bolus band), the peak of the estimated force is within 3 % of the peak of the
plant's true patient force (the estimate is that force through the 1/K_O first-order lag); a limit below
it trips the safe state within the cycle the estimate crosses it, one above it does not. Validity: with the
bolus bitten, the RLS alone goes to a negative stiffness; the published estimate never does, the bolus's
axis is flagged invalid, and what is published as valid stays within 10 % of the patient's impedance; a
bolus arriving later ends the validity within 10 cycles and the estimate is held. Bad settings are refused
naming the key. Real time: nothing retained per cycle, the compiled steps allocate nothing.
"""
import math
from types import SimpleNamespace

import numpy as np
import pytest

from rtctl.config import build, validate
from rtctl.plants.jaw.bite import BiteMonitor
from rtctl.plants.jaw.model import JawRehabRobot

MECH = JawRehabRobot()
REST_LEGS = MECH.robot.leg_lengths(MECH.rest_pose)
PATIENT = {"stiffness": [450.0, 200.0, 350.0, 5.0, 2.0, 4.0], "damping": [8.0, 3.0, 6.0, 0.1, 0.03, 0.08]}


def jaw_loop(patient, trajectory):
    raw = {"robot": {"model": "jaw"}, "plant": {"type": "jaw", "substeps": 2, "initial_position": REST_LEGS.tolist()},
           "patient": patient, "driver": {"backend": "sim"},
           "controller": {"type": "jaw_computed_torque", "kp": 10000.0}, "trajectory": trajectory,
           "loop": {"rate_hz": 1000.0, "pace": False},
           "safety": {"safe_mode": "damping", "position_margin": 0.002}}
    loop = build(validate(raw))
    return loop, loop.drivers[0].plant


def chewing(opening=0.012, frequency=2.0):
    """Legs of an open-close cycle of the incisal point between occlusion and ``opening`` m (leg-space
    sinusoid through the incisal-point inverse kinematics of both ends)."""
    legs = np.zeros((2, 6))
    for k, pz in enumerate((0.0, -opening)):
        MECH.incisal_to_legs(np.array([0.0, 0.0, pz]), np.zeros(3), np.zeros(3), legs[k], np.zeros(6), np.zeros(6))
    center, half = legs.mean(axis=0), (legs[1] - legs[0]) / 2
    return {"type": "sinusoid", "center": center.tolist(), "amplitude": np.abs(half).tolist(),
            "frequency": frequency, "phase": np.where(half > 0, -np.pi / 2, np.pi / 2).tolist()}


@pytest.mark.slow
def test_the_patient_impedance_is_identified_online():
    multi_sine = {"type": "sinusoid", "center": REST_LEGS.tolist(), "amplitude": [0.003] * 6,
                  "frequency": [0.7, 0.9, 1.1, 1.3, 1.7, 1.9], "phase": [0.0] * 6}
    loop, plant = jaw_loop(PATIENT, multi_sine)
    mon = BiteMonitor(loop.controller.mechanism, loop.safety, loop.period, force_limit=100.0).attach(loop)
    report = loop.run(duration=6.0)
    assert not report.tripped, report.trip_reason
    print("identified K", np.round(mon.stiffness, 4), "D", np.round(mon.damping, 5))
    np.testing.assert_allclose(mon.stiffness, PATIENT["stiffness"], rtol=5e-3)
    np.testing.assert_allclose(mon.damping, PATIENT["damping"], rtol=5e-3)
    assert mon.valid.all()                  # every coordinate moved, no bolus: all published as valid
    names = mon.telemetry_fields
    assert np.array_equal(mon.telemetry_values[names.index("patient_stiffness/x"):][:6], mon.stiffness)
    assert mon.telemetry_values[names.index("bite_force")] == mon.bite_force


def bolus_run(limit):
    loop, plant = jaw_loop({**PATIENT, "bolus_force": 20.0, "bolus_damping": 200.0, "bolus_band": [-0.010, 0.0]},
                           chewing())
    mon = BiteMonitor(loop.controller.mechanism, loop.safety, loop.period, force_limit=limit).attach(loop)
    rows = []
    loop.hooks.append(lambda c, t, s, cmd: rows.append((mon.bite_force, np.linalg.norm(plant.patient_wrench()[:3]),
                                                        plant.bolus_force)))
    return loop, mon, rows


@pytest.mark.slow
def test_the_bite_force_is_estimated_and_a_limit_below_it_trips_the_safe_state():
    loop, mon, rows = bolus_run(limit=1e4)
    loop.run(duration=2.0)
    est, true, bolus = np.array(rows).T
    assert bolus.max() > 15.0                                  # the bolus was bitten
    peak = true.max()
    lag = round(1.0 / 50.0 / loop.period)                      # the observer's time constant, in cycles
    err = np.abs(est[lag:] - true[:-lag]).max() / peak
    print(f"bite: true peak {peak:.2f} N, estimate peak {est.max():.2f} N, error (1/K_O lag) {err:.2%}")
    assert abs(est.max() - peak) < 0.03 * peak
    limit = 0.8 * est.max()
    loop, mon, rows = bolus_run(limit=limit)
    loop.run(duration=2.0)
    assert loop.safety.tripped and mon.trips == 1
    assert "bite force" in loop.safety.trip_reason and "above the therapist's limit" in loop.safety.trip_reason
    crossed = int(np.argmax(np.array(rows)[:, 0] > limit))
    assert loop.safety.trip_cycle == crossed
    loop, mon, rows = bolus_run(limit=1.05 * peak)
    loop.run(duration=2.0)
    assert not loop.safety.tripped and mon.trips == 0


def impedance_run(duration, bolus_from=0.0):
    """Chewing (2 Hz open-close through the bolus band) with the bolus switched on at ``bolus_from`` s; per cycle the
    published K, D and validity, the running RLS estimate and the plant's bolus force."""
    from rtctl.plants.jaw import kernels as jk

    loop, mon, _ = bolus_run(limit=1e4)
    plant = loop.drivers[0].plant
    bolus = plant.P[jk.CPL, [jk.C_BD, jk.C_BF]].copy()
    plant.P[jk.CPL, [jk.C_BD, jk.C_BF]] = 0.0 if bolus_from > 0 else bolus
    loop.boundary_hooks.append(lambda lp: plant.P.__setitem__((jk.CPL, [jk.C_BD, jk.C_BF]), bolus)
                               if lp.cycle == round(bolus_from / lp.period) else None)
    rows = {"K": [], "D": [], "valid": [], "rls": [], "bolus": []}

    def record(cycle, t, state, command):
        for name, value in (("K", mon.stiffness), ("D", mon.damping), ("valid", mon.valid), ("rls", mon.rls_estimate)):
            rows[name].append(value.copy())
        rows["bolus"].append(plant.bolus_force)
    loop.hooks.append(record)
    loop.run(duration=duration)
    out = SimpleNamespace(**{k: np.array(v) for k, v in rows.items()}, monitor=mon)
    out.valid = out.valid > 0
    out.bitten = int(np.argmax(out.bolus > 0.0))                    # the first cycle the bolus pushes
    return out


def band_error(run):
    """The largest |published / true - 1| of K and of D over the cycles each coordinate was published as valid."""
    true_k, true_d = np.array(PATIENT["stiffness"]), np.array(PATIENT["damping"])
    return (np.where(run.valid, np.abs(run.K / true_k - 1), 0.0).max(),
            np.where(run.valid, np.abs(run.D / true_d - 1), 0.0).max())


@pytest.mark.slow
def test_with_the_bolus_bitten_the_published_impedance_stays_physical_and_near_the_patients():
    """Bitten from the first closing on: the RLS alone fits the bolus with a negative z stiffness (about -1450 N/m,
    the audit's figure); the published estimate never goes negative, z (the bolus's axis) is never valid, and
    what is published as valid stays within 10 % of the patient's K and D (measured: 3.7 % and 1.6 %)."""
    run = impedance_run(3.0)
    assert run.bolus.max() > 15.0 and run.bitten < 400
    assert run.rls[:, 2, 0].min() < -1000.0                        # what was published before, without a flag
    assert np.all(run.K >= 0.0) and np.all(run.D >= 0.0)
    assert not run.valid[:, 2].any()
    k_err, d_err = band_error(run)
    print(f"bolus from the start: valid share per coordinate {np.round(run.valid.mean(axis=0), 3)}, "
          f"largest error when valid K {k_err:.2%} D {d_err:.2%}")
    assert run.valid[-1, :2].all()                                  # x and y, moved and not pushed, are identified
    assert k_err < 0.10 and d_err < 0.10
    mon, names = run.monitor, run.monitor.telemetry_fields
    start = names.index("patient_impedance_valid/x")
    assert np.array_equal(mon.telemetry_values[start:start + 6], mon.valid)
    assert np.array_equal(mon.telemetry_values[names.index("patient_damping/x"):][:6], run.D[-1])


@pytest.mark.slow
def test_a_bolus_arriving_ends_the_validity_at_once_and_the_estimate_is_held():
    """Valid z before the bolus (K and D within 1 %); its first bite ends the validity within 10 cycles, and the last
    valid estimate is held (within 1 %) while the RLS alone runs far off."""
    run = impedance_run(4.0, bolus_from=2.5)
    k = run.bitten
    assert k >= 2500 and run.valid[k - 1, 2]
    true_k, true_d = PATIENT["stiffness"][2], PATIENT["damping"][2]
    assert abs(run.K[k - 1, 2] / true_k - 1) < 0.01 and abs(run.D[k - 1, 2] / true_d - 1) < 0.01
    ended = int(np.argmax(~run.valid[k:, 2]))
    print(f"bolus arriving: z invalid {ended} cycles after its first bite; held K {run.K[-1, 2]:.1f} N/m, D "
          f"{run.D[-1, 2]:.3f} N s/m; RLS alone K down to {run.rls[k:, 2, 0].min():.0f} N/m")
    assert ended <= 10 and not run.valid[k + ended:, 2].any()
    assert abs(run.K[-1, 2] / true_k - 1) < 0.01 and abs(run.D[-1, 2] / true_d - 1) < 0.01
    assert run.rls[k:, 2, 0].min() < 0.0
    assert np.all(run.K >= 0.0) and np.all(run.D >= 0.0)
    k_err, d_err = band_error(run)
    assert k_err < 0.10 and d_err < 0.10


@pytest.mark.parametrize("bad", [math.nan, math.inf, -5.0, 0.0, "20"])
def test_a_bad_force_limit_is_named(bad):
    loop, _ = jaw_loop({}, {"type": "min_jerk", "goal": REST_LEGS.tolist(), "duration": 1.0})
    with pytest.raises(ValueError, match=r"bite: force_limit must be a finite force > 0 N, got"):
        BiteMonitor(loop.controller.mechanism, loop.safety, loop.period, force_limit=bad)
    with pytest.raises(ValueError, match=r"frame 'molar' does not exist; frames of this platform"):
        BiteMonitor(loop.controller.mechanism, loop.safety, loop.period, force_limit=20.0, frame="molar")


@pytest.mark.parametrize("key, unit", [("fit_window", " s"), ("fit_tolerance", ""), ("min_speed", " m/s"),
                                       ("min_angular_speed", " rad/s"), ("initial_covariance", "")])
def test_bad_validity_settings_are_named(key, unit):
    loop, _ = jaw_loop({}, {"type": "min_jerk", "goal": REST_LEGS.tolist(), "duration": 1.0})
    for bad in (0.0, -1.0, math.nan, "1"):
        with pytest.raises(ValueError, match=rf"^bite: {key} must be finite and > 0{unit}, got "):
            BiteMonitor(loop.controller.mechanism, loop.safety, loop.period, force_limit=20.0, **{key: bad})


@pytest.mark.slow
def test_a_bite_section_in_a_run_config_attaches_the_monitor_and_bad_values_are_one_line():
    from rtctl.config import ConfigError

    hold = {"type": "min_jerk", "goal": REST_LEGS.tolist(), "duration": 1.0}
    raw = {"robot": {"model": "jaw"}, "plant": {"type": "jaw", "initial_position": REST_LEGS.tolist()},
           "controller": {"type": "jaw_computed_torque", "kp": 10000.0}, "trajectory": hold,
           "loop": {"rate_hz": 1000.0, "pace": False}, "telemetry": {"enabled": True, "endpoint": "tcp://127.0.0.1:0"},
           "safety": {"position_margin": 0.002}, "bite": {"enabled": True, "force_limit": 25.0}}
    loop = build(validate(raw))
    try:
        monitors = [h for h in loop.hooks if isinstance(h, BiteMonitor)]
        assert len(monitors) == 1 and monitors[0].force_limit == 25.0
        assert "jaw/bite_force" in loop.telemetry.extra_names or any("bite_force" in n
                                                                      for n in loop.telemetry.extra_names)
        loop.run(cycles=50)
        assert not loop.safety.tripped and monitors[0].bite_force < 25.0
    finally:
        loop.telemetry.close()
    for bad, match in (({"enabled": True, "force_limit": math.nan}, r"\[bite\] force_limit"),
                       ({"enabled": True}, r": \[bite\] force_limit is required")):
        with pytest.raises(ConfigError, match=match) as err:
            build(validate(dict(raw, bite=bad, telemetry={})))
        assert "\n" not in str(err.value) and "[controller]" not in str(err.value)   # the section it is in
    arm = {"robot": {"model": "arm7"}, "controller": {"type": "computed_torque", "kp": 100.0},
           "bite": {"enabled": True, "force_limit": 25.0}}
    with pytest.raises(ConfigError, match=r"\[bite\] applies to controller 'jaw_computed_torque'|\[bite\] applies to"):
        validate(arm)


@pytest.mark.slow
def test_the_cpg_phase_takes_the_estimated_bite_force_as_feedback(tmp_path):
    from rtctl.config import ConfigError, bundled_config_path, load_config
    from rtctl.loops.cpg.generator import ST_FEEDBACK_TARGET
    from rtctl.plants.jaw.cpg_trajectory import BiteForceFeedback

    text = bundled_config_path("jaw").read_text().replace(
        't0 = 0.5', 't0 = 0.5\nfeedback_gain = 0.05\nfeedback_source = "bite_force"')
    path = tmp_path / "jaw.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"feedback_source = 'bite_force' needs the bite monitor"):
        build(load_config(path))
    path.write_text(text + "\n[bite]\nenabled = true\nforce_limit = 200.0\n")
    cfg = load_config(path)
    cfg["loop"]["pace"] = False
    cfg["schedule"] = []
    loop = build(cfg)
    feedback = [h for h in loop.hooks if isinstance(h, BiteForceFeedback)]
    assert len(feedback) == 1 and loop.hooks.index(feedback[0]) > loop.hooks.index(feedback[0].monitor)
    loop.run(duration=1.5)
    monitor = feedback[0].monitor
    assert not loop.safety.tripped and monitor.bite_force > 1.0   # the patient's tissue pushes back
    cpg = loop.trajectory.cpg
    assert cpg._st[ST_FEEDBACK_TARGET] == monitor.bite_force and 0.0 < cpg.feedback   # H2's input, then its filter


@pytest.mark.slow
def test_the_bite_monitor_allocates_nothing_per_cycle():
    """The monitor (jaw observer, bite force, RLS, telemetry values) over a bolus bite: no Python allocation in
    its modules after warm-up (the compiled calls are held to numba's counter below)."""
    from allocation_counter import retained_per_cycle

    import rtctl.plants.jaw.bite as bite_mod
    import rtctl.plants.jaw.observer as jaw_mod
    import rtctl.plants.stewart.observer as obs_mod

    loop, mon, _ = bolus_run(limit=1e4)
    loop.hooks.pop()                          # the recording hook of bolus_run allocates by design
    growth = retained_per_cycle(loop, [bite_mod, jaw_mod, obs_mod])
    assert not growth, "\n".join(str(d) for d in growth[:10])
    assert mon.observer.samples == 1900 and mon.peak_bite_force > 15.0   # it ran, through the bolus


ALLOC_SCRIPT = """
import numpy as np
from numba import njit
from numba.core.runtime import rtsys
from rtctl.plants.jaw.bite import rls_step
from rtctl.plants.jaw.model import JawRehabRobot
from rtctl.plants.jaw.observer import jaw_observer
from rtctl.plants.stewart.observer import observer_step

@njit
def cycles(n, o, q, v, tau, x, fk_tol, fk_iter, X, Y, decay, dt, wk, wv, x_rest, lam, r1, r2, theta, P, w):
    bad = 0
    for k in range(n):
        bad += observer_step(o[0], o[1], o[2], q, v, tau, x, fk_tol, fk_iter, X, Y, decay, dt, k == 0, wk, wv)
        rls_step(X[2], x, X[6], x_rest, decay, lam, r1, r2, theta, P, k == 0, 0.998, w[0], 0.1, w[1], w[2], w[3])
    return bad

m = JawRehabRobot()
obs = jaw_observer(m, 50.0, 1e-3)
x = m.rest_pose + np.array([0.0, 0.0, -0.005, 0.0, 0.0, 0.02])
q = m.robot.leg_lengths(x)
P = np.zeros((6, 2, 2))
P[:, 0, 0] = P[:, 1, 1] = 1e6
args = ((obs.pts_all, obs.par_all, obs.maps), q, np.full(6, 0.01), np.full(6, 3.0), obs.x, obs.fk_tol,
        obs.fk_max_iter, obs._X, obs._Y, obs.decay, obs.dt, obs._wk, obs._wv, np.array(m.rest_pose), 0.9995,
        np.zeros((6, 2)), np.zeros((6, 2)), np.zeros((6, 2)), P,
        (np.full(6, 5e-4), np.zeros((6, 6)), np.zeros((6, 2)), np.zeros(6)))
assert cycles(1, *args) == 0
counts = allocations(cycles, *args)
print("allocations for 1 and 300 cycles:", counts)
assert counts[0] == counts[1], counts
print("OK")
"""


@pytest.mark.slow
def test_the_compiled_observer_and_rls_steps_allocate_nothing():
    """The jaw observer's step and the RLS step run 300 times from a compiled loop with numba's allocation
    counter unchanged (tests/test_allocation.py)."""
    from allocation_counter import run_with_allocation_counters

    out = run_with_allocation_counters(ALLOC_SCRIPT)
    assert out.strip().endswith("OK")
