"""The chewing CPG as coupled Hopf oscillators (issue 22, item 4; Kalani et al., 2018): the limit cycle corrects
perturbations at the rates the equations give, changes keep the jerk within a bound derived from the
parameters, a pattern switch keeps the frequency, the axes lock to the set phase differences, feedback
shifts the phase by the closed-form amount, and the sagittal incisal path is a loop, not a line.

Equation labels (H1-H5, O1-O7) are those of :mod:`rtctl.loops.cpg.oscillators`."""
import math

import numpy as np
import pytest
from scipy.integrate import quad

from rtctl.loops.cpg import ChewingCPG, TherapistLimits, shipped_patterns
from rtctl.loops.cpg.generator import DEFAULT_CONVERGENCE, DEFAULT_COUPLING, DEFAULT_FILTER_RATE, MAX_FEEDBACK_ADVANCE
from rtctl.loops.cpg.oscillators import ST_FEEDBACK_TARGET
from rtctl.loops.cpg.patterns import REFERENCE_CYCLES, SAGITTAL_LOOP_PEAK

DT = 1e-3
GAMMA, K, LAM = DEFAULT_CONVERGENCE, DEFAULT_COUPLING, DEFAULT_FILTER_RATE


def run(cpg, seconds, dt=DT, at=None, request=None):
    """Outputs (n, 4, 3), phases (n, 3), radii (n, 3) after each of ``seconds / dt`` steps; ``request()``
    is called before the step that starts at time ``at``."""
    n = int(round(seconds / dt))
    k = None if at is None else int(round(at / dt))
    outs, phases, radii = np.empty((n, 4, 3)), np.empty((n, 3)), np.empty((n, 3))
    for i in range(n):
        if i == k:
            request()
        cpg.step(dt)
        outs[i], phases[i], radii[i] = cpg.output, cpg.phases, cpg.radii
    return outs, phases, radii


def settle_time(error, fraction):
    """Index of the first sample after which ``|error| <= fraction * |error[0]|`` for good."""
    above = np.nonzero(np.abs(error) > fraction * abs(error[0]))[0]
    return above[-1] + 1


# -- perturbation recovery (H1, H3, H2, H4) ----------------------------------------------
def hopf_radius(r0, t, gamma=GAMMA):
    """Exact solution of (H1): r^2(t) = 1 / (1 + (1/r0^2 - 1) exp(-2 gamma t))  (H3)."""
    return 1.0 / np.sqrt(1.0 + (1.0 / r0 ** 2 - 1.0) * np.exp(-2.0 * gamma * t))


def hopf_time_to(r0, fraction, gamma=GAMMA):
    """Time (s) at which |r - 1| falls to ``fraction`` of |r0 - 1|, inverted from (H3)."""
    rt = 1.0 + fraction * (r0 - 1.0)
    return -math.log((1.0 / rt ** 2 - 1.0) / (1.0 / r0 ** 2 - 1.0)) / (2.0 * gamma)


def test_amplitude_perturbation_decays_on_the_hopf_solution_within_the_derived_time():
    """Radii kicked to 0.5, 1.3 and 1.5 follow (H3) to 1e-12 and reach 1 % of their error in the time
    (H3) gives; at gamma = 4/s the slowest (r0 = 0.5) takes 0.711 s = 0.89 cycles at 1.25 Hz, so the
    stated bound is 1 cycle. The output is the pattern scaled by the radius, so its error decays alike."""
    cpg = ChewingCPG("normal", start_at_rest=False)
    run(cpg, 1.0)
    r0 = np.array([1.3, 0.5, 1.5])
    cpg.perturb(radius=r0)
    outs, phases, radii = run(cpg, 3.0)
    t = DT * np.arange(1, len(radii) + 1)
    for i in range(3):
        np.testing.assert_allclose(radii[:, i], hopf_radius(r0[i], t), rtol=0, atol=1e-12)
        measured = t[settle_time(np.concatenate([[r0[i] - 1.0], radii[:, i] - 1.0]), 0.01) - 1]
        assert measured == pytest.approx(hopf_time_to(r0[i], 0.01), abs=DT)
    cycle = 1.0 / cpg.target_frequency
    assert max(hopf_time_to(r, 0.01) for r in r0) < 1.0 * cycle
    pattern = cpg.pattern
    nominal = np.array([pattern.evaluate(ph[0]) for ph in phases])
    late = t >= cycle
    error = np.max(np.abs(outs[late, 0] - nominal[late]))
    assert error <= 0.01 * 0.5 * np.max(np.abs(nominal)) + 1e-12   # 1 % of the largest kick (|r0 - 1| = 0.5)


def test_phase_perturbation_relocks_on_the_exact_solution_and_keeps_the_common_shift():
    """One axis kicked by d0 = 1 rad: by symmetry d = theta_1 - theta_0 = theta_1 - theta_2 obeys
    d' = -3 k sin d (H2), so tan(d/2) = tan(d0/2) exp(-3 k t); 1 % of d0 after
    ln(tan(d0/2) / tan(d0/200)) / (3 k) = 0.783 s = 0.98 cycles at k = 2/s, 1.25 Hz (stated bound: 1
    cycle). The sum of the phases is invariant under the coupling, so the rhythm keeps d0/3 of the kick:
    a limit cycle corrects the shape, not the timing."""
    cpg = ChewingCPG("normal", start_at_rest=False)
    reference = ChewingCPG("normal", start_at_rest=False)
    run(cpg, 0.5)
    run(reference, 0.5)
    d0 = 1.0
    cpg.perturb(phase=(0.0, d0, 0.0))
    _, phases, _ = run(cpg, 3.0)
    _, ref_phases, _ = run(reference, 3.0)
    t = DT * np.arange(1, len(phases) + 1)
    d = phases[:, 1] - phases[:, 0]
    exact = 2.0 * np.arctan(math.tan(d0 / 2) * np.exp(-3.0 * K * t))
    np.testing.assert_allclose(d, exact, rtol=0, atol=1e-10)
    np.testing.assert_allclose(phases[:, 2] - phases[:, 0], 0.0, atol=1e-12)
    bound = math.log(math.tan(d0 / 2) / math.tan(0.01 * d0 / 2)) / (3.0 * K)
    assert t[settle_time(np.concatenate([[d0], d]), 0.01) - 1] == pytest.approx(bound, abs=DT)
    assert bound < 1.0 / cpg.target_frequency
    shift = np.angle(np.exp(1j * (phases[-1] - ref_phases[-1])))
    np.testing.assert_allclose(shift, d0 / 3.0, atol=1e-9)


def test_axes_lock_to_the_set_phase_differences_at_the_linear_rate():
    """With offsets delta = (0, 0.3, -0.5) rad and arbitrary initial phases, theta_i - theta_0 converges to
    delta_i - delta_0 (H2); the slowest mode of the linearised coupling decays at 3 k (H4)."""
    delta = np.array([0.0, 0.3, -0.5])
    cpg = ChewingCPG("normal", start_at_rest=False, phase_offsets=delta)
    cpg.perturb(phase=(0.0, 0.4, -0.25))
    _, phases, _ = run(cpg, 6.0)
    error = (phases[:, 1:] - phases[:, :1]) - (delta[1:] - delta[0])
    assert np.max(np.abs(error[-1])) < 1e-9
    t = DT * np.arange(1, len(phases) + 1)
    window = (t > 2.0) & (t < 4.0)   # small errors: the linear regime
    norm = np.linalg.norm(error, axis=1)
    rate = -np.polyfit(t[window], np.log(norm[window]), 1)[0]
    assert rate == pytest.approx(3.0 * K, rel=1e-3)


# -- smooth changes: jerk bound (O3-O6) -----------------------------------------------------
def filter_derivative_peaks(order=3):
    """max_s |d^n R / ds^n|, n = 0..order, of the remaining fraction R(s) = exp(-s)(1 + s + s^2/2 + s^3/6)
    of a target step through the four-stage filter (O3), s = lambda t."""
    s = np.linspace(0.0, 40.0, 400001)
    e = np.exp(-s)
    derivs = [e * (1 + s + s ** 2 / 2 + s ** 3 / 6), -e * s ** 3 / 6, e * (s ** 3 / 6 - s ** 2 / 2),
              e * (-s ** 3 / 6 + s ** 2 - s)]
    return [float(np.max(np.abs(d))) for d in derivs[:order + 1]]


def jerk_bound(c_old, c_new, w_old, w_new, lam_c=LAM, lam_w=LAM):
    """Upper bound on |p_j'''| per axis through a change of coefficients c_old -> c_new (3, 2H+1) and of
    omega w_old -> w_new, on the locked cycle (r = 1, no feedback), from (O5) with theta' = omega:

        |F'''| <= sum_h |c'''|_h + 3 |c''|_h h W + 3 |c'|_h (h^2 W^2 + h |w'|)
                  + |c|_h (h^3 W^3 + 3 h^2 W |w'| + h |w''|)

    with |c|_h the norm of the (a_h, b_h) pair (|a cos + b sin| <= |(a, b)|), |c^(n)| <= |dc| lam^n m_n,
    |c| <= max(|c_old|, |c_new|) (a convex combination), W = max omega, |w^(n)| <= |dw| lam^n m_n, and
    m_n the filter peaks of :func:`filter_derivative_peaks`."""
    m = filter_derivative_peaks()
    nh = (c_old.shape[1] - 1) // 2
    big_w = max(w_old, w_new)
    w1, w2 = abs(w_new - w_old) * lam_w * m[1], abs(w_new - w_old) * lam_w ** 2 * m[2]
    dc = c_new - c_old
    bound = np.abs(dc[:, 0]) * lam_c ** 3 * m[3]
    def pair(c, h):
        return np.hypot(c[:, h], c[:, nh + h])

    for h in range(1, nh + 1):
        size, step = np.maximum(pair(c_old, h), pair(c_new, h)), pair(dc, h)
        bound = bound + (step * lam_c ** 3 * m[3] + 3 * step * lam_c ** 2 * m[2] * h * big_w
                         + 3 * step * lam_c * m[1] * (h ** 2 * big_w ** 2 + h * w1)
                         + size * (h ** 3 * big_w ** 3 + 3 * h ** 2 * big_w * w1 + h * w2))
    return bound


CHANGES = {
    "amplitude x1.5": (1.25, lambda c: c.set_amplitude(1.5)),
    "frequency 1.0 -> 1.6 Hz": (1.0, lambda c: c.set_frequency(1.6)),
    "pattern normal -> hard_food": (1.25, lambda c: c.set_pattern("hard_food")),
    "pattern + frequency + amplitude": (1.25, lambda c: (c.set_pattern("lateral_grinding", 1.5),
                                                         c.set_amplitude((1.2, 1.0, 1.2)))),
}


@pytest.mark.parametrize("label", list(CHANGES))
def test_jerk_through_changes_stays_below_the_bound_from_the_parameters(label):
    """Finite-difference jerk of the output position agrees with the analytic jerk (O5) and stays below
    :func:`jerk_bound` of the change, per axis, before, through and after the change."""
    f0, request = CHANGES[label]
    cpg = ChewingCPG("normal", frequency=f0, start_at_rest=False)
    c_old, w_old = cpg.kernel_args[1][0].copy(), 2 * math.pi * cpg.target_frequency
    at = 1.0
    outs, _, _ = run(cpg, at + 2.5, at=at, request=lambda: request(cpg))
    c_new, w_new = cpg.kernel_args[1][0].copy(), 2 * math.pi * cpg.target_frequency
    p = outs[:, 0]
    fd_jerk = (p[3:] - 3 * p[2:-1] + 3 * p[1:-2] - p[:-3]) / DT ** 3   # jerk at the midpoint of 4 samples
    analytic_mid = 0.5 * (outs[1:-2, 3] + outs[2:-1, 3])
    scale = np.max(np.abs(outs[:, 3]), axis=0)
    assert np.all(np.max(np.abs(fd_jerk - analytic_mid), axis=0) < 2e-3 * scale), label
    bound = jerk_bound(c_old, c_new, w_old, w_new)
    peak = np.max(np.abs(fd_jerk), axis=0)
    assert np.all(peak <= bound), (label, peak, bound)


def test_frequency_is_kept_through_a_pattern_switch():
    """At 1.5 Hz a switch to hard_food (nominal 1.0 Hz) or lateral_grinding leaves omega untouched:
    the phase advances by exactly omega dt every step and every cycle lasts 1/1.5 s, transition included.
    The jaw trajectory's control-channel path keeps it too."""
    cpg = ChewingCPG("normal", frequency=1.5, start_at_rest=False, limits=TherapistLimits(max_speed=0.2))
    run(cpg, 0.5)
    cpg.set_pattern("hard_food")
    assert cpg.target_frequency == 1.5
    _, phases, _ = run(cpg, 3.0)
    advance = np.diff(np.unwrap(phases[:, 0]))
    np.testing.assert_allclose(advance, 2 * math.pi * 1.5 * DT, rtol=0, atol=1e-12)
    assert cpg.frequency == pytest.approx(1.5, rel=1e-15)
    from rtctl.plants.jaw.cpg_trajectory import JawCPGTrajectory
    traj = JawCPGTrajectory(JawCPGTrajectory.Options(pattern="normal", frequency=1.5), limits={"max_speed": 0.25})
    q = [np.zeros(6) for _ in range(3)]
    for k in range(500):
        traj.sample(k * DT, *q)
    apply, _ = traj.validate_cpg_request({"pattern": "lateral_grinding"})
    apply(None)
    assert traj.cpg.targets["pattern"] == "lateral_grinding" and traj.cpg.target_frequency == 1.5


# -- sensory feedback (H2, H5) ----------------------------------------------------------------
def crossing_times(phase_unwrapped, t):
    """Times at which the unwrapped phase passes each multiple of 2 pi (linear interpolation)."""
    turns = np.floor(phase_unwrapped / (2 * math.pi))
    idx = np.nonzero(np.diff(turns) > 0)[0]
    level = 2 * math.pi * turns[idx + 1]
    frac = (level - phase_unwrapped[idx]) / (phase_unwrapped[idx + 1] - phase_unwrapped[idx])
    return t[idx] + frac * (t[idx + 1] - t[idx])


@pytest.mark.parametrize("ratio", [0.5, 0.9, -0.15])
def test_constant_feedback_changes_the_period_by_the_closed_form(ratio):
    """sigma u = ratio * omega held: every cycle lasts T = 2 pi / sqrt(omega (omega - sigma u)) (H5),
    longer for a positive (bite force) value, shorter for a negative one; the axes stay locked."""
    f, sigma = 1.25, 0.5
    w = 2 * math.pi * f
    cpg = ChewingCPG("normal", start_at_rest=False, feedback_gain=sigma)
    u = ratio * w / sigma
    cpg.set_feedback(u)
    run(cpg, 2.0)   # the feedback filter (20/s) settles: remaining fraction 4e-14
    _, phases, _ = run(cpg, 8.0)
    t = DT * np.arange(len(phases))
    periods = np.diff(crossing_times(np.unwrap(phases[:, 0]), t))
    expected = 2 * math.pi / math.sqrt(w * (w - sigma * u))
    np.testing.assert_allclose(periods, expected, rtol=2e-6)
    assert (expected > 1 / f) == (ratio > 0)
    np.testing.assert_allclose(phases[:, 1:] - phases[:, :1], 0.0, atol=1e-12)


def test_feedback_above_the_gain_holds_the_jaw_before_occlusion_and_an_advance_is_limited():
    """sigma u = 2 omega: the phase stops at the stable zero of (H2), theta* = 2 pi - arccos(2 omega /
    (sigma u) - 1) = 2 pi - pi/2 (closing side, before occlusion); a negative value is limited to
    sigma u >= -0.2 omega, so the speed envelope checked against the therapist's limits holds."""
    f, sigma = 1.25, 1.0
    w = 2 * math.pi * f
    cpg = ChewingCPG("normal", start_at_rest=False, feedback_gain=sigma)
    cpg.set_feedback(2.0 * w / sigma)
    _, phases, _ = run(cpg, 4.0)
    assert phases[-1, 0] == pytest.approx(2 * math.pi - math.acos(2 * w / (2 * w) - 1), abs=1e-9)
    assert np.ptp(phases[-500:, 0]) < 1e-9
    cpg.set_feedback(-10.0 * w / sigma)
    assert cpg.kernel_args[0][ST_FEEDBACK_TARGET] == pytest.approx(-MAX_FEEDBACK_ADVANCE * w / sigma)
    free = ChewingCPG("normal", start_at_rest=False, feedback_gain=sigma)
    with pytest.raises(ValueError, match="must be finite"):
        free.set_feedback(float("nan"))


def test_a_feedback_pulse_delays_the_phase_by_the_integral_of_h2():
    """A 0.2 s bite-force pulse through the filter: the phase lag behind an unfed CPG equals the
    integral of sigma u(t) g(phi(t)) dt of (H2), evaluated independently with scipy's adaptive
    quadrature over the 1 ms records of u and phi, linearly interpolated (agrees to 6e-7 rad; asserted to
    5e-6 rad)."""
    sigma, force = 0.05, 40.0    # 0.05 rad/s per N, 40 N
    fed = ChewingCPG("normal", start_at_rest=False, feedback_gain=sigma)
    free = ChewingCPG("normal", start_at_rest=False)
    u_log, phi_log = [], []
    for i in range(3000):
        fed.set_feedback(force if 500 <= i < 700 else 0.0)
        u_log.append(fed.feedback)
        phi_log.append(fed.phases[0])
        fed.step(DT)
        free.step(DT)
    lag = float(np.angle(np.exp(1j * (free.phases[0] - fed.phases[0]))))
    t = DT * np.arange(3000)
    u_of_t = lambda x: np.interp(x, t, u_log)                                  # noqa: E731
    phi_of_t = lambda x: np.interp(x, t, np.unwrap(phi_log))                   # noqa: E731
    expected, _ = quad(lambda x: sigma * u_of_t(x) * 0.5 * (1 + math.cos(phi_of_t(x))), 0.0, t[-1],
                       limit=2000, points=list(np.arange(0.5, 1.5, 0.05)))
    assert lag > 0.1
    assert lag == pytest.approx(expected, abs=5e-6)


# -- the sagittal path (teardrop, not a line) ---------------------------------------------------
def strokes(y, z):
    """Split one cycle (occlusion -> largest opening -> occlusion) into opening and closing strokes and
    give y on each at common heights (5 %..95 % of the opening)."""
    i_open = int(np.argmax(-z))
    i0 = int(np.argmax(z))
    order = np.roll(np.arange(len(z)), -i0)
    k = int(np.nonzero(order == i_open)[0][0])
    down, up = order[:k + 1], order[k:]
    depth = -z.min()
    levels = -depth * np.linspace(0.05, 0.95, 181)
    y_open = np.interp(-levels, -z[down], y[down])
    y_close = np.interp(levels, z[up], y[up])
    return levels, y_open, y_close


def shoelace(y, z):
    return 0.5 * float(np.sum(y * np.roll(z, -1) - np.roll(y, -1) * z))


def loop_area(c):
    """Area enclosed by the reference model's sagittal path, from Green's theorem on
    y = -P B^m + L B sin s / (2 peak), z = -O B^m (B = (1 - cos s)/2):
    A = (L O m / (4 peak)) integral_0^2pi B^m sin^2 s ds (only the odd term encloses area)."""
    m = c["vertical_exponent"]
    integral, _ = quad(lambda s: (0.5 * (1 - math.cos(s))) ** m * math.sin(s) ** 2, 0.0, 2 * math.pi)
    return c["sagittal_loop"] * c["opening"] * m / (4 * SAGITTAL_LOOP_PEAK) * integral


@pytest.mark.parametrize("name", list(REFERENCE_CYCLES))
def test_sagittal_path_is_a_loop_with_the_stated_proportions(name):
    """The incisal path the running CPG draws in the sagittal plane encloses the area of the closed form
    (Green's theorem, 1 %); the opening stroke runs anterior to the closing one at every height between
    5 % and 95 % of the opening, at most ``sagittal_loop`` apart (2.0 mm for the 17 mm normal cycle: 1/8.5
    of the opening; 2 %), by ``sagittal_loop B sin s / (3 sqrt(3) / 8)`` at the height ``z = -O B^m``
    (``sin s = sqrt(1 - (1 - 2B)^2)``; 2 % of the loop): closed at occlusion and at the largest opening."""
    c = REFERENCE_CYCLES[name]
    cpg = ChewingCPG(name, start_at_rest=False)
    period = 1.0 / cpg.target_frequency
    outs, _, _ = run(cpg, period, dt=period / 4000)
    y, z = outs[:, 0, 1], outs[:, 0, 2]
    area = shoelace(y, z)
    assert area < 0   # clockwise with anterior y to the right, z up: down the front, up the back
    assert -area == pytest.approx(loop_area(c), rel=0.01)
    levels, y_open, y_close = strokes(y, z)
    separation = y_open - y_close
    assert np.all(separation > 0)
    assert separation.max() == pytest.approx(c["sagittal_loop"], rel=0.02)
    bump = (levels / -c["opening"]) ** (1.0 / c["vertical_exponent"])     # B at each height, z = -O B^m
    profile = c["sagittal_loop"] * bump * np.sqrt(1.0 - (1.0 - 2.0 * bump) ** 2) / SAGITTAL_LOOP_PEAK
    np.testing.assert_allclose(separation, profile, rtol=0, atol=0.02 * c["sagittal_loop"])
    depth = -z.min()
    assert depth == pytest.approx(c["opening"], rel=1e-6)
    assert np.ptp(y) / depth == pytest.approx(np.ptp(shipped_patterns()[name].reference[:, 1]) / c["opening"],
                                              rel=0.01)


def test_jaw_trajectory_options_and_the_tracking_error_hook(tmp_path):
    """The [trajectory] keys reach the oscillators; with feedback_source = "tracking_error" attach() adds
    the hook once, which feeds |q_d - q| of the closed loop into the phase and so lags the rhythm."""
    from rtctl.config import build, bundled_config_path, load_config
    from rtctl.plants.jaw.cpg_trajectory import LegTrackingFeedback
    text = bundled_config_path("jaw").read_text().replace(
        't0 = 0.5', 't0 = 0.5\ncoupling = 3.0\nconvergence = 5.0\nfeedback_gain = 2000.0\n'
                    'feedback_source = "tracking_error"')
    path = tmp_path / "jaw.toml"
    path.write_text(text)
    cfg = load_config(path)
    cfg["loop"]["pace"] = False
    cfg["schedule"] = []   # with feedback on, 1.5 Hz x 1.5 breaks max_speed at the 20 % feedback advance
    loop = build(cfg)
    traj = loop.trajectory
    params = traj.cpg.oscillator_parameters
    assert params["coupling"] == 3.0 and params["convergence"] == 5.0 and params["feedback_gain"] == 2000.0
    traj.add_loop_hooks(loop)
    traj.add_loop_hooks(loop)
    assert sum(isinstance(h, LegTrackingFeedback) for h in loop.hooks) == 1
    loop.run(duration=2.0)
    assert traj.cpg.feedback > 0.0
    elapsed = 2.0 - traj.t0
    assert traj.cpg.time == pytest.approx(elapsed, abs=2 * DT)
    free_phase = (2 * math.pi * traj.cpg.target_frequency * traj.cpg.time) % (2 * math.pi)
    lag = float(np.angle(np.exp(1j * (free_phase - traj.cpg.phase))))
    assert lag > 0.0


@pytest.mark.slow
def test_the_plots_are_written_with_the_measured_figures(tmp_path):
    from rtctl.plants.jaw.plots_cpg import plot_feedback, plot_incisal_paths, plot_perturbation_recovery
    path, measures = plot_incisal_paths(tmp_path)
    assert path.stat().st_size > 20_000
    for name, m in measures.items():
        assert m["max_separation_m"] == pytest.approx(REFERENCE_CYCLES[name]["sagittal_loop"], rel=0.02)
        assert m["area_m2"] == pytest.approx(loop_area(REFERENCE_CYCLES[name]), rel=0.01)
    path, rec = plot_perturbation_recovery(tmp_path)
    assert path.stat().st_size > 20_000
    assert rec["amplitude_1pct_s"] == pytest.approx(hopf_time_to(0.5, 0.01)) and rec["phase_1pct_s"] < rec["cycle_s"]
    path, fb = plot_feedback(tmp_path)
    assert path.stat().st_size > 20_000 and fb["lag_rad"] > 0.1
