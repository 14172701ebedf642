"""The chewing CPG of :mod:`loops.cpg` (Kalani et al., 2018; issue 8): exact oscillator integration, learning
convergence, pattern files, shipped reference cycles, smooth online modulation, therapist limits,
no allocation per step."""
import json
import math
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rtctl.loops.cpg import (
    ChewingCPG, ChewingPattern, PatternFileError, Refused, TherapistLimits, cpg_step, fourier_coefficients,
    learn_cycle, learn_pattern, load_pattern, save_pattern, shipped_patterns,
)
from rtctl.loops.cpg.learning import build_reference_pattern
from rtctl.loops.cpg.patterns import REFERENCE_CYCLES, TEARDROP_PARAMETERS, reference_samples, teardrop_cycle

from allocation_counter import run_with_allocation_counters

DT = 1e-3
LAM = 10.0  # default filter rate (1/s)


def remaining(t, lam=LAM):
    """Fraction of a target step still to go after t s: exp(-s) (1 + s + s^2/2 + s^3/6), s = lam t."""
    s = lam * np.asarray(t)
    return np.exp(-s) * (1.0 + s + s * s / 2.0 + s ** 3 / 6.0)


def run(cpg, seconds, dt=DT, at=None, request=None):
    """Step ``cpg`` for ``seconds``; call ``request()`` before the step that starts at time ``at``.
    Returns outputs (n, 4, 3) and phases (n,) after each step."""
    n = int(round(seconds / dt))
    k = None if at is None else int(round(at / dt))
    outs, phases = np.empty((n, 4, 3)), np.empty(n)
    for i in range(n):
        if i == k:
            request()
        cpg.step(dt)
        outs[i] = cpg.output
        phases[i] = cpg.phase
    return outs, phases


# -- the oscillator: exact integration (O2, O3, O6, O7) --------------------------------
def test_frequency_step_follows_the_closed_form_exactly():
    """phi(t) = w1 t + (w0 - w1) / lam [4 - exp(-s)(4 + 3 s + s^2 + s^3 / 6)], at any step sizes."""
    cpg = ChewingCPG("normal", frequency=1.0, start_at_rest=False)
    w0, w1 = 2 * math.pi * 1.0, 2 * math.pi * 1.5
    cpg.set_frequency(1.5)
    rng = np.random.default_rng(3)
    t, phase_unwrapped, prev = 0.0, 0.0, cpg.phase
    for dt in rng.uniform(1e-4, 0.05, 300):
        cpg.step(dt)
        t += dt
        phase_unwrapped += (cpg.phase - prev) % (2 * math.pi)
        prev = cpg.phase
        s = LAM * t
        expected = w1 * t + (w0 - w1) / LAM * (4.0 - math.exp(-s) * (4.0 + 3.0 * s + s * s + s ** 3 / 6.0))
        assert phase_unwrapped == pytest.approx(expected, abs=1e-11)
        assert cpg.frequency * 2 * math.pi == pytest.approx(w1 + (w0 - w1) * remaining(t), abs=1e-11)
    assert cpg.time == pytest.approx(t, abs=1e-12)


def test_amplitude_step_follows_the_closed_form_and_steady_output_is_the_pattern():
    cpg = ChewingCPG("normal", start_at_rest=False)
    pattern, w = cpg.pattern, 2 * math.pi * cpg.target_frequency
    outs, phases = run(cpg, 0.8)
    for o, ph in zip(outs, phases):  # steady: O1 and O5 with constant coefficients and omega
        for d in range(4):
            np.testing.assert_allclose(o[d], pattern.evaluate(ph, d) * w ** d, rtol=0, atol=1e-12 * w ** d)
    cpg.set_amplitude((1.5, 0.5, 1.5))
    outs, phases = run(cpg, 1.0)
    t = DT * np.arange(1, len(phases) + 1)
    gain = np.array([1.5, 0.5, 1.5])[None, :] - np.array([0.5, -0.5, 0.5])[None, :] * remaining(t)[:, None]
    np.testing.assert_allclose(outs[:, 0], gain * pattern.evaluate(phases).T, rtol=0, atol=1e-14)


def test_derivatives_are_consistent_during_simultaneous_transitions():
    cpg = ChewingCPG("normal", start_at_rest=True)
    cpg.set_frequency(1.4)
    cpg.set_pattern("lateral_grinding", frequency=1.4)
    dt = 1e-4
    outs, _ = run(cpg, 0.6, dt=dt)
    for d in range(3):  # central differences of each output against the next
        fd = (outs[2:, d] - outs[:-2, d]) / (2 * dt)
        scale = np.max(np.abs(outs[:, d + 1]))
        assert np.max(np.abs(fd - outs[1:-1, d + 1])) < 2e-6 * scale


def test_start_at_rest_and_stop_return_to_occlusion():
    cpg = ChewingCPG("hard_food")
    np.testing.assert_array_equal(cpg.output, 0.0)  # occlusion, at rest, zero acceleration and jerk
    outs, _ = run(cpg, 3.0)
    assert np.max(-outs[:, 0, 2]) == pytest.approx(REFERENCE_CYCLES["hard_food"]["opening"], rel=1e-5)
    cpg.stop()
    assert cpg.amplitude_scale == (0.0, 0.0, 0.0)
    outs, _ = run(cpg, 2.0)
    env = cpg.pattern.envelope()  # back to rest at occlusion to the filters' remaining 3.2e-6 after 2 s
    scale = np.array([env.max_opening, env.max_speed, env.max_acceleration, env.max_jerk])
    assert np.all(np.max(np.abs(outs[-1]), axis=1) < 1e-5 * scale)


# -- learning (L1-L6) ------------------------------------------------------------------
def test_learning_converges_from_a_wrong_frequency_to_the_fourier_series():
    ref = reference_samples("normal", 256)
    for f0 in (0.5, 0.8, 2.0):  # the reference cycles at 1.25 Hz
        result = learn_cycle(ref, 1.25, initial_frequency=f0, duration=40.0)
        p = result.pattern
        assert p.frequency == pytest.approx(1.25, rel=1e-9)
        assert result.frequency_history[0] == pytest.approx(f0, rel=0.05)
        assert result.settling_time < 12.0  # s: windowed RMS error below 1e-3 of the range from then on
        assert np.all(result.rms_error < 1e-9)  # m, online error (L3) over the last 5 cycles
        rms, peak = p.fit_error()
        assert np.all(peak < 1e-9)
        # the fixed point is the batch least-squares Fourier series of the cycle, in the pattern phase
        cos, sin = fourier_coefficients(p.reference, p.n_harmonics)
        np.testing.assert_allclose(p.cos, cos, rtol=0, atol=5e-10)
        np.testing.assert_allclose(p.sin, sin, rtol=0, atol=5e-10)
    early = result.error_history[:20].max()  # first 2 s, m
    assert early > 1e-3  # the error really starts large (from 2.0 Hz) and decays
    assert p.sin[2, 1] == 0.0 and p.cos[2, 1] > 0  # phase origin: vertical fundamental highest at psi = 0


def test_learning_a_noisy_recording_at_another_frequency():
    rng = np.random.default_rng(0)
    params = {k: REFERENCE_CYCLES["normal"][k] for k in
              ("opening", "lateral", "posterior", "vertical_exponent", "lateral_exponent", "skew")}
    t = np.arange(40000) * DT
    noise = 5e-5  # m
    y = teardrop_cycle(2 * np.pi * 1.1 * t, **params) + rng.normal(scale=noise, size=(t.size, 3))
    result = learn_pattern(y, DT, initial_frequency=0.8)
    assert result.pattern.frequency == pytest.approx(1.1, abs=1e-4)
    assert np.all(result.rms_error < 1.1 * noise) and np.all(result.rms_error > 0.9 * noise)
    # the learned cycle is the clean model cycle (noise averaged out) up to the choice of phase origin
    theta = 2 * np.pi * np.arange(512) / 512
    clean = teardrop_cycle(theta, **params)
    def misfit(shift):
        return np.sqrt(np.mean((result.pattern.evaluate(theta + shift).T - clean) ** 2))

    grid = np.linspace(0, 2 * np.pi, 720, endpoint=False)
    best = grid[np.argmin([misfit(x) for x in grid])]
    fine = np.linspace(best - grid[1], best + grid[1], 801)
    shift = fine[np.argmin([misfit(x) for x in fine])]
    assert misfit(shift) < 0.2 * noise  # RMS (m), against noise of 5e-5 m per sample
    assert np.max(np.abs(result.pattern.evaluate(theta + shift).T - clean)) < 0.5 * noise


def test_learning_rejects_bad_input():
    with pytest.raises(ValueError, match="samples must be an"):
        learn_pattern(np.zeros((100, 2)), DT, initial_frequency=1.0)
    with pytest.raises(ValueError, match="dt must be finite and > 0"):
        learn_pattern(np.ones((100, 3)), -1.0, initial_frequency=1.0)
    with pytest.raises(ValueError, match="samples must move"):
        learn_pattern(np.ones((1000, 3)), DT, initial_frequency=1.0)
    with pytest.raises(ValueError, match="initial_frequency"):
        learn_pattern(np.random.default_rng(0).normal(size=(1000, 3)), DT, initial_frequency=float("nan"))


# -- pattern files ---------------------------------------------------------------------
def test_save_and_reload_gives_identical_output(tmp_path):
    learned = learn_cycle(reference_samples("lateral_grinding", 128), 1.1, initial_frequency=0.9,
                          duration=30.0, name="patient_a").pattern
    path = save_pattern(learned, tmp_path / "patient_a.json")
    loaded = load_pattern(path)
    assert loaded.name == "patient_a" and loaded.frequency == learned.frequency
    np.testing.assert_array_equal(loaded.cos, learned.cos)
    np.testing.assert_array_equal(loaded.sin, learned.sin)
    np.testing.assert_array_equal(loaded.reference, learned.reference)
    a, b = ChewingCPG(learned), ChewingCPG(loaded)
    out_a, _ = run(a, 2.0)
    out_b, _ = run(b, 2.0)
    np.testing.assert_array_equal(out_a, out_b)
    c = ChewingCPG("normal", library=[loaded])
    assert "patient_a" in c.patterns
    c.set_pattern("patient_a")  # the running frequency is kept through a pattern switch
    assert c.targets["pattern"] == "patient_a" and c.target_frequency == pytest.approx(shipped_patterns()["normal"].frequency)
    c.set_pattern("patient_a", frequency=learned.frequency)
    assert c.target_frequency == learned.frequency


def _write(tmp_path, d, name="bad.json"):
    path = tmp_path / name
    path.write_text(json.dumps(d))
    return path


@pytest.mark.parametrize("edit, field", [
    (lambda d: d.pop("cos"), "'cos' is missing"),
    (lambda d: d.update(format="something"), "'format' must be"),
    (lambda d: d.update(version=2), "'version' must be 1"),
    (lambda d: d.update(frequency_hz=-1.0), "'frequency_hz' must be a finite number > 0"),
    (lambda d: d.update(n_harmonics=0), "'n_harmonics' must be an integer"),
    (lambda d: d.update(cos=d["cos"][:2]), "'cos' must have shape"),
    (lambda d: d["sin"][1].__setitem__(0, 1e-3), "'sin' column 0"),
    (lambda d: d["cos"][2].__setitem__(3, "x"), "'cos' must be a 3 x 9 array"),
    (lambda d: d.update(reference=[[0.0, 0.0]]), "'reference' must be an"),
    (lambda d: d.update(sources="one string"), "'sources' must be a list"),
    (lambda d: d.update(name=""), "'name' must be a non-empty string"),
])
def test_malformed_pattern_files_name_the_file_and_field(tmp_path, edit, field):
    d = shipped_patterns()["normal"].to_dict()
    edit(d)
    path = _write(tmp_path, d)
    with pytest.raises(PatternFileError) as info:
        load_pattern(path)
    assert str(path) in str(info.value) and field in str(info.value)


def test_unreadable_and_non_json_pattern_files(tmp_path):
    with pytest.raises(PatternFileError, match="missing.json: cannot read"):
        load_pattern(tmp_path / "missing.json")
    (tmp_path / "broken.json").write_text('{"format": ')
    with pytest.raises(PatternFileError, match=r"broken.json: not valid JSON \(line 1"):
        load_pattern(tmp_path / "broken.json")
    d = shipped_patterns()["normal"].to_dict()
    text = json.dumps(d).replace(str(d["cos"][0][1]), "NaN", 1)
    (tmp_path / "nan.json").write_text(text)
    with pytest.raises(PatternFileError, match="nan.json: field 'cos' must be finite"):
        load_pattern(tmp_path / "nan.json")


# -- shipped reference cycles -----------------------------------------------------------
def test_shipped_patterns_reproduce_their_reference_cycles():
    shipped = shipped_patterns()
    assert sorted(shipped) == ["hard_food", "lateral_grinding", "normal"]
    for name, p in shipped.items():
        rms, peak = p.fit_error()
        assert np.all(peak < 1e-9), name  # m: the learned series is the reference cycle
        c = REFERENCE_CYCLES[name]
        assert p.frequency == pytest.approx(c["frequency_hz"], rel=1e-9)
        # the CPG's steady output over a cycle, sampled at the reference's phases
        cpg = ChewingCPG(name, start_at_rest=False)
        outs, phases = run(cpg, 1.0 / p.frequency)
        err = [np.max(np.abs(o[0] - p.evaluate(ph))) for o, ph in zip(outs, phases)]
        assert max(err) < 1e-12
        n = p.reference.shape[0]
        tau0 = p.metadata["fit"]["reference_fraction_at_psi0"]  # the model cycle, started at pattern phase 0...
        model = teardrop_cycle(2 * math.pi * (tau0 + np.arange(n) / n),
                               **{k: c[k] for k in TEARDROP_PARAMETERS})
        np.testing.assert_allclose(p.reference, model, rtol=0, atol=1e-8)
        assert np.max(np.abs(p.evaluate(2 * math.pi * np.arange(n) / n).T - p.reference)) < 1e-9  # ...in phase


def test_shipped_data_is_what_learning_produces():
    for name, shipped in shipped_patterns().items():
        rebuilt = build_reference_pattern(name)
        np.testing.assert_allclose(rebuilt.cos, shipped.cos, rtol=0, atol=1e-12)
        np.testing.assert_allclose(rebuilt.sin, shipped.sin, rtol=0, atol=1e-12)
        assert rebuilt.frequency == pytest.approx(shipped.frequency, rel=1e-12)


def test_shipped_patterns_have_the_cited_typical_values():
    k = {name: p.kinematics() for name, p in shipped_patterns().items()}
    normal, hard, grind = k["normal"], k["hard_food"], k["lateral_grinding"]
    assert 1.0 <= normal["frequency_hz"] <= 1.5  # cycles/s (Buschang 2000: 1.03-1.20; Pasinato 2017: 1.19-1.29)
    assert 0.015 <= normal["opening_m"] <= 0.020  # 15-20 mm vertical opening
    assert hard["opening_m"] > normal["opening_m"] and hard["frequency_hz"] < normal["frequency_hz"]
    assert hard["lateral_excursion_m"] > normal["lateral_excursion_m"]  # harder: larger amplitudes (Pasinato)
    assert grind["lateral_excursion_m"] > hard["lateral_excursion_m"] > normal["lateral_excursion_m"]
    for name, m in k.items():
        assert 1.0 <= round(m["frequency_hz"], 9) <= 1.5, name
        assert m["opening_m"] < 0.045, name  # inside the maximal incisal opening
        assert 0.040 <= m["mean_vertical_speed_m_s"] <= 0.080, name  # "around 60 mm/s"
        # peak opening/closing speeds: habitual chewing 80.0 / 83.5 +- 17 mm/s (Pasinato 2017)
        assert 0.055 <= m["peak_opening_speed_m_s"] <= 0.110, name
        assert 0.055 <= m["peak_closing_speed_m_s"] <= 0.110, name
        assert m["peak_closing_speed_m_s"] > m["peak_opening_speed_m_s"], name
        assert 0.2 < m["opening_duration_s"] < 0.45 and 0.2 < m["closing_duration_s"] < 0.45, name
    for name, p in shipped_patterns().items():  # closes into occlusion, never above it; working side x >= 0
        q = p.evaluate(np.linspace(0, 2 * math.pi, 4096, endpoint=False))
        assert abs(np.max(q[2])) < 1e-9 and np.min(q[0]) > -1e-9, name
        assert p.sources and p.metadata["reference_model"]["opening"] == REFERENCE_CYCLES[name]["opening"]


# -- online modulation: continuity, jerk, convergence -------------------------------------
STEP_AT = 3.0
REQUESTS = {
    "frequency 1.0 -> 1.5 Hz": ("normal", 1.0, lambda c: c.set_frequency(1.5)),
    "amplitude x1.5": ("normal", 1.0, lambda c: c.set_amplitude(1.5)),
    "pattern normal -> hard_food": ("normal", 1.25, lambda c: c.set_pattern("hard_food")),
    "pattern normal -> lateral_grinding": ("normal", 1.25, lambda c: c.set_pattern("lateral_grinding")),
}


@pytest.mark.parametrize("label", list(REQUESTS))
def test_modulation_is_continuous_with_bounded_jerk_and_converges(label):
    start, f0, request = REQUESTS[label]
    cpg = ChewingCPG(start, frequency=f0, start_at_rest=False)
    outs, phases = run(cpg, STEP_AT + 4.0, at=STEP_AT, request=lambda: request(cpg))
    k = int(round(STEP_AT / DT))
    settled = k + int(round(2.0 / DT))  # remaining(2 s) = 2e-6
    before, transition, after = outs[:k], outs[k:settled], outs[settled:]
    # no discontinuity: the largest per-step change of p, pd, pdd, pjerk stays within 1.1 x steady
    steps = np.max(np.abs(np.diff(outs, axis=0)), axis=2)
    steady_steps = np.maximum(steps[:k - 1].max(axis=0), steps[settled:].max(axis=0))
    assert np.all(steps.max(axis=0) <= 1.1 * steady_steps), steps.max(axis=0) / steady_steps
    # peak jerk during the transition within 1.1 x the larger steady-state peak jerk
    jerk = np.linalg.norm(outs[:, 3], axis=1)
    steady_jerk = max(np.linalg.norm(before[:, 3], axis=1).max(), np.linalg.norm(after[:, 3], axis=1).max())
    assert np.linalg.norm(transition[:, 3], axis=1).max() <= 1.1 * steady_jerk
    assert jerk.max() <= 1.1 * steady_jerk
    # converged to the new cycle 1.6 s after the request: position within 1e-4 of its opening,
    # velocity within 1e-4 of its peak speed
    new = cpg.pattern.scaled(cpg.amplitude_scale)
    w = 2 * math.pi * cpg.target_frequency
    env = new.envelope(cpg.target_frequency)
    late = slice(k + int(round(1.6 / DT)), None)
    p_err = max(np.max(np.abs(o[0] - new.evaluate(ph))) for o, ph in zip(outs[late], phases[late]))
    v_err = max(np.max(np.abs(o[1] - new.evaluate(ph, 1) * w)) for o, ph in zip(outs[late], phases[late]))
    assert p_err < 1e-4 * env.max_opening and v_err < 1e-4 * env.max_speed
    assert cpg.frequency == pytest.approx(cpg.target_frequency, rel=1e-9)


def test_requests_mid_transition_stay_continuous():
    cpg = ChewingCPG("normal", start_at_rest=True)
    schedule = [(0.3, lambda: cpg.set_frequency(1.45)), (0.5, lambda: cpg.set_pattern("hard_food", 1.2)),
                (0.55, lambda: cpg.set_amplitude((1.2, 1.0, 1.1))), (0.9, lambda: cpg.set_pattern("normal", 0.9)),
                (1.0, cpg.stop)]
    outs = []
    for i in range(2500):
        for t, req in schedule:
            if i == int(round(t / DT)):
                req()
        cpg.step(DT)
        outs.append(cpg.output.copy())
    outs = np.array(outs)
    steps = np.max(np.abs(np.diff(outs, axis=0)), axis=2)
    peaks = np.max(np.abs(outs), axis=(0, 2))
    # the largest change per 1 ms step is a small fraction of each signal's range: nothing jumps
    assert np.all(steps.max(axis=0) < np.array([0.02, 0.03, 0.05, 0.1]) * peaks)
    assert np.max(np.abs(outs[-1, 0])) < 1e-5 and np.max(np.abs(outs[-1, 1])) < 1e-4  # stopped at occlusion


# -- therapist limits ---------------------------------------------------------------------
def test_limits_refuse_out_of_range_requests_with_the_reason():
    limits = TherapistLimits(max_opening=0.025, max_speed=0.12, min_frequency=0.8, max_frequency=1.6, max_force=30.0)
    cpg = ChewingCPG("normal", limits=limits)
    before = cpg.targets
    with pytest.raises(Refused, match=r"frequency 1.8 Hz is outside the allowed range \[0.8, 1.6\] Hz") as info:
        cpg.set_frequency(1.8)
    assert info.value.field == "frequency" and info.value.value == 1.8 and info.value.limit == (0.8, 1.6)
    with pytest.raises(Refused, match=r"opening would reach 25.53 mm, above max_opening 25.00 mm"):
        cpg.set_amplitude((1.0, 1.0, 1.5))
    with pytest.raises(Refused, match=r"speed would reach 1\d\d.\d mm/s, above max_speed 120.0 mm/s"):
        cpg.set_amplitude((1.0, 1.0, 1.4))
    with pytest.raises(Refused, match="speed would reach"):
        cpg.set_frequency(1.6)  # 98.3 mm/s at 1.25 Hz -> 125.8 mm/s at 1.6 Hz
    with pytest.raises(Refused, match="unknown pattern 'walking'; available"):
        cpg.set_pattern("walking")
    with pytest.raises(Refused, match=r"amplitude_scale values must be finite and >= 0, got \[1.0, -1.0, 1.0\]"):
        cpg.set_amplitude((1.0, -1.0, 1.0))
    with pytest.raises(Refused, match="amplitude_scale must be a number or 3 numbers"):
        cpg.set_amplitude((1.0, 1.0))
    with pytest.raises(Refused, match="frequency must be finite"):
        cpg.set_frequency(float("nan"))
    assert cpg.targets == before  # nothing changed
    cpg.set_amplitude((1.2, 1.0, 1.1))  # opening 18.7 mm
    cpg.set_pattern("lateral_grinding", frequency=1.2)
    cpg.set_frequency(1.5)
    assert cpg.targets == {"pattern": "lateral_grinding", "frequency": 1.5, "amplitude_scale": [1.2, 1.0, 1.1]}
    assert cpg.limits.max_force == 30.0
    with pytest.raises(Refused, match="initial request: the incisal opening would reach 20.02 mm"):
        ChewingCPG("hard_food", limits=TherapistLimits(max_opening=0.018))


def test_limits_catch_a_transition_that_exceeds_both_steady_cycles():
    """Slowing from 2 Hz while growing 4x: omega still high while the amplitude rises -- speed ~1.56x."""
    cpg = ChewingCPG("normal", frequency=2.0, amplitude_scale=0.5, start_at_rest=False)
    pattern = cpg.pattern
    cpg.set_frequency(0.5)
    steady = max(pattern.envelope(2.0, [0.5] * 3).max_speed, pattern.envelope(0.5, [2.0] * 3).max_speed)
    predicted = cpg.predict(amplitude_scale=2.0)
    assert predicted.max_speed > 1.4 * steady
    cpg.set_limits(TherapistLimits(max_speed=1.2 * steady))
    with pytest.raises(Refused, match="amplitude scale .* speed would reach"):
        cpg.set_amplitude(2.0)
    run(cpg, 2.5)  # once the frequency has settled the same request is safe
    cpg.set_amplitude(2.0)
    outs, _ = run(cpg, 3.0)
    assert np.linalg.norm(outs[:, 1], axis=1).max() <= 1.2 * steady


def test_new_limits_that_the_running_cycle_breaks_are_refused():
    cpg = ChewingCPG("hard_food")
    with pytest.raises(Refused, match="new limits refused, the running cycle breaks them: .* max_opening 15.00 mm"):
        cpg.set_limits(TherapistLimits(max_opening=0.015))
    with pytest.raises(Refused, match="frequency 1 Hz is outside the allowed range"):
        cpg.set_limits(TherapistLimits(min_frequency=1.1))
    assert cpg.limits == TherapistLimits()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests=st.lists(st.tuples(st.sampled_from(["frequency", "amplitude", "pattern"]),
                                   st.floats(0.3, 2.4), st.floats(0.0, 2.0), st.floats(0.0, 0.4)),
                         min_size=1, max_size=4))
@pytest.mark.slow
def test_accepted_requests_keep_the_output_inside_the_limits(requests):
    limits = TherapistLimits(max_opening=0.024, max_speed=0.13)
    cpg = ChewingCPG("normal", limits=limits)
    names = ["normal", "hard_food", "lateral_grinding"]
    worst = np.zeros(2)
    for kind, a, b, wait in requests:
        predicted = None
        try:
            if kind == "frequency":
                predicted = cpg.predict(frequency=a)
                cpg.set_frequency(a)
            elif kind == "amplitude":
                predicted = cpg.predict(amplitude_scale=(b, 1.0, b))
                cpg.set_amplitude((b, 1.0, b))
            else:
                name = names[int(a * 10) % 3]
                predicted = cpg.predict(pattern=name)  # at the running frequency, which a switch keeps
                cpg.set_pattern(name)
        except Refused as exc:
            over = predicted.max_opening > limits.max_opening or predicted.max_speed > limits.max_speed
            out_of_range = exc.field == "frequency" and exc.limit == (limits.min_frequency, limits.max_frequency)
            assert over or out_of_range, exc.reason  # refused only for a reason that holds
        outs, _ = run(cpg, wait)
        if len(outs):
            worst = np.maximum(worst, [np.max(-outs[:, 0, 2]), np.max(np.linalg.norm(outs[:, 1], axis=1))])
    outs, _ = run(cpg, 2.5)
    worst = np.maximum(worst, [np.max(-outs[:, 0, 2]), np.max(np.linalg.norm(outs[:, 1], axis=1))])
    assert worst[0] <= limits.max_opening and worst[1] <= limits.max_speed


def test_limits_object_validation():
    with pytest.raises(ValueError, match="max_opening must be finite and > 0, got -0.01"):
        TherapistLimits(max_opening=-0.01)
    with pytest.raises(ValueError, match="max_force must be finite and > 0, got 0"):
        TherapistLimits(max_force=0)
    with pytest.raises(ValueError, match="min_frequency 2.0 Hz must not exceed max_frequency 1.0 Hz"):
        TherapistLimits(min_frequency=2.0, max_frequency=1.0)
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['max_jerk'\]"):
        TherapistLimits.from_dict({"max_jerk": 1.0})
    limits = TherapistLimits(max_force=25.0)
    assert TherapistLimits.from_dict(limits.to_dict()) == limits


def test_step_rejects_bad_dt():
    cpg = ChewingCPG("normal")
    for bad in (-1e-3, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="dt must be finite and >= 0 s"):
            cpg.step(bad)
    with pytest.raises(ValueError, match="dt must be a number"):
        cpg.step("0.001")
    p = cpg.output.copy()
    cpg.step(0.0)
    np.testing.assert_array_equal(cpg.output, p)


def test_pattern_with_too_many_harmonics_is_refused():
    normal = shipped_patterns()["normal"]
    k = normal.n_harmonics + 2
    cos = np.zeros((3, k + 1))
    cos[:, :normal.n_harmonics + 1] = normal.cos
    sin = np.zeros((3, k + 1))
    sin[:, :normal.n_harmonics + 1] = normal.sin
    rich = ChewingPattern("rich", 1.2, cos, sin)
    cpg = ChewingCPG("normal")
    with pytest.raises(Refused, match="pattern 'rich' has 10 harmonics, this CPG holds 8"):
        cpg.set_pattern(rich)
    big = ChewingCPG("normal", harmonics=10)
    big.set_pattern(rich)
    assert big.targets["pattern"] == "rich"


# -- real-time property ---------------------------------------------------------------------
ALLOC_SCRIPT = textwrap.dedent("""
    import numpy as np
    from numba import njit
    from numba.core.runtime import rtsys
    from rtctl.loops.cpg import ChewingCPG, cpg_step

    @njit
    def cycles(n, dt, st, coef, out):
        bad = 0
        for _ in range(n):
            bad += cpg_step(dt, st, coef, out)
        return bad

    cpg = ChewingCPG("normal", feedback_gain=0.05, phase_offsets=(0.0, 0.2, -0.1))
    cpg.set_pattern("hard_food", frequency=1.0)
    cpg.set_feedback(30.0)
    cpg.perturb(phase=(0.0, 0.5, 0.0), radius=(1.2, 0.8, 1.0))  # every term of the kernel at work
    st, coef, out = cpg.kernel_args
    assert cycles(1, 1e-3, st, coef, out) == 0
    counts = allocations(cycles, 1e-3, st, coef, out, n=3000)
    print("allocations for 1 and 3000 steps:", counts)
    assert counts[0] == counts[1], counts
    print("OK")
""")


@pytest.mark.slow
def test_compiled_step_allocates_nothing():
    out = run_with_allocation_counters(ALLOC_SCRIPT)
    assert out.strip().endswith("OK")


def test_kernel_reports_bad_arguments():
    cpg = ChewingCPG("normal")
    st_, coef, out = cpg.kernel_args
    assert cpg_step(1e-3, st_, coef, out) == 0
    assert cpg_step(-1.0, st_, coef, out) == 1
    assert cpg_step(1e-3, st_[:-1].copy(), coef, out) == 2
    assert cpg_step(1e-3, st_, coef, np.zeros((3, 3))) == 2
