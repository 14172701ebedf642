"""Learning a chewing pattern -- frequency and Fourier output layer -- from a reference, online.

The learner is the adaptive-frequency phase oscillator with a Fourier series
in its feedback loop (Petric, Gams, Ijspeert & Zlajpah 2011, IJRR 30(14),
eqs. 1-6; the single-oscillator form of the two-layer system of Gams, Ijspeert,
Schaal & Lenarcic 2009, Auton Robot 27:3-23, ref. [34] of Kalani et al. 2018,
which in turn uses the adaptive phase oscillator of Righetti, Buchli &
Ijspeert 2006, Physica D 216:269-281)::

    phi-dot   = Omega - K e sin(phi)                     (L1)
    Omega-dot = -K e sin(phi)                            (L2)
    e_j       = y_j - yhat_j                             (L3)
    yhat_j    = sum_{c=0..M} alpha_jc cos(c phi) + beta_jc sin(c phi)   (L4)
    alpha-dot_jc = eta cos(c phi) e_j                    (L5)
    beta-dot_jc  = eta sin(c phi) e_j                    (L6)

for the three axes ``j`` of the incisal point, which share one oscillator:
the frequency feedback uses ``e = sum_j e_j``. Signals are divided by one
common scale (the largest per-axis range) so that ``K`` (1/s) and ``eta``
(1/s) do not depend on units. The oscillator adapts ``Omega`` to the
fundamental of the reference and phase-locks to it; the Fourier layer (L5-L6,
a least-mean-squares rule) then converges to the Fourier coefficients of the
reference, whose truncation residual holds only harmonics above ``M`` and
leaves (L1-L2) unbiased; as ``e -> 0`` both adaptations stop, which is the
"Fourier-series tuning of the CPG" of Kalani et al. (2018) done as a dynamical
system. (L1-L6) are integrated by explicit Euler at the sampling interval of
the reference, as in the cited works. The learned coefficients are finally
expressed in the pattern phase of :mod:`loops.cpg.patterns` (rotation by the
phase of the vertical fundamental).

:func:`fourier_coefficients` gives the batch least-squares answer for one
sampled cycle (the fixed point the learner converges to), for checks.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from .patterns import REFERENCE_CYCLES, SHIPPED_LEARNING, TEARDROP_PARAMETERS, ChewingPattern, reference_samples

__all__ = ["LearningResult", "build_reference_pattern", "fourier_coefficients", "learn_cycle", "learn_pattern", "phase_origin", "rotate_phase"]


@njit(cache=True)
def _afo_learn(y, dt, coupling, rate, state, alpha, beta, window, freq_hist, err_hist, max_hist):
    """Integrate (L1-L6) over the samples ``y`` (n, 3) (explicit Euler, step ``dt``).

    ``state`` = [phi, Omega] in and out. Per window of ``window`` samples: the
    sum of Omega (rad/s) into ``freq_hist``, the sum of squared errors (L3)
    and the largest absolute error per axis into ``err_hist``/``max_hist``.
    """
    n = y.shape[0]
    m = alpha.shape[1] - 1
    phi = state[0]
    om = state[1]
    for i in range(n):
        cos1 = math.cos(phi)
        sin1 = math.sin(phi)
        e_sum = 0.0
        wi = i // window
        for j in range(3):
            yh = alpha[j, 0]
            ck, sk = cos1, sin1
            for c in range(1, m + 1):
                yh += alpha[j, c] * ck + beta[j, c] * sk
                ck, sk = ck * cos1 - sk * sin1, sk * cos1 + ck * sin1
            e = y[i, j] - yh
            e_sum += e
            g = dt * rate * e
            alpha[j, 0] += g
            ck, sk = cos1, sin1
            for c in range(1, m + 1):
                alpha[j, c] += g * ck
                beta[j, c] += g * sk
                ck, sk = ck * cos1 - sk * sin1, sk * cos1 + ck * sin1
            if wi < err_hist.shape[0]:
                err_hist[wi, j] += e * e
                if abs(e) > max_hist[wi, j]:
                    max_hist[wi, j] = abs(e)
        if wi < freq_hist.shape[0]:
            freq_hist[wi] += om
        d = -coupling * e_sum * sin1
        phi += dt * (om + d)
        om += dt * d
        if phi >= 2.0 * math.pi or phi < 0.0:
            phi -= 2.0 * math.pi * math.floor(phi / (2.0 * math.pi))
    state[0] = phi
    state[1] = om


def fourier_coefficients(cycle, n_harmonics: int) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares Fourier coefficients (cos, sin), each (3, K + 1), of one cycle sampled at ``2 pi i / N``."""
    cyc = np.asarray(cycle, dtype=np.float64)
    n = cyc.shape[0]
    if cyc.ndim != 2 or cyc.shape[1] != 3 or n < 2 * n_harmonics + 2:
        raise ValueError(f"fourier_coefficients: cycle must be (N, 3) with N >= 2 n_harmonics + 2 = "
                         f"{2 * n_harmonics + 2}, got shape {cyc.shape}")
    spec = np.fft.rfft(cyc, axis=0) / n
    cos = np.zeros((3, n_harmonics + 1))
    sin = np.zeros((3, n_harmonics + 1))
    cos[:, 0] = spec[0].real
    cos[:, 1:] = 2.0 * spec[1:n_harmonics + 1].real.T
    sin[:, 1:] = -2.0 * spec[1:n_harmonics + 1].imag.T
    return cos, sin


def rotate_phase(cos, sin, shift: float) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients of ``P(psi + shift)`` given those of ``P(psi)``."""
    k = np.arange(cos.shape[1])
    c, s = np.cos(k * shift), np.sin(k * shift)
    return cos * c + sin * s, sin * c - cos * s


def phase_origin(cos, sin) -> float:
    """The phase (rad) at which the vertical fundamental ``a_z1 cos + b_z1 sin`` is highest."""
    return float(math.atan2(sin[2, 1], cos[2, 1]))


@dataclass(frozen=True)
class LearningResult:
    """Outcome of :func:`learn_pattern`.

    ``pattern``: the learned :class:`ChewingPattern` (phase origin of
    :mod:`loops.cpg.patterns`; frequency: mean ``Omega`` over the last
    ``eval_cycles`` cycles). ``frequency_history`` (Hz) and
    ``error_history`` (RMS error per axis, m): per ``window`` s of the run.
    ``rms_error``/``max_error`` (m, per axis): online error (L3) over the last
    ``eval_cycles`` cycles. ``settling_time`` (s): start of the first window
    after which every window's RMS error stays below the tolerance (``inf`` if
    never). ``phase_at_start``: pattern phase (rad) at the first sample,
    extrapolated back with the learned frequency.
    """

    pattern: ChewingPattern
    frequency_history: np.ndarray
    error_history: np.ndarray
    window: float
    rms_error: np.ndarray
    max_error: np.ndarray
    settling_time: float
    phase_at_start: float


def _number(name, value, *, positive=True):
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"learn_pattern: {name} must be a number, got {value!r}") from None
    if not math.isfinite(x) or (positive and x <= 0):
        raise ValueError(f"learn_pattern: {name} must be finite{' and > 0' if positive else ''}, got {value!r}")
    return x


def learn_pattern(samples, dt: float, *, initial_frequency: float, n_harmonics: int = 8, coupling: float = 20.0,
                  learning_rate: float = 2.0, eval_cycles: int = 5, window: float = 0.1,
                  settle_tolerance: float = 1e-3, name: str = "learned", description: str = "",
                  sources=()) -> LearningResult:
    """Learn frequency and Fourier series from a recorded incisal trajectory by (L1-L6).

    ``samples``: (n, 3) displacements from occlusion (m, axes x, y, z of
    :mod:`loops.cpg.patterns`) at the fixed interval ``dt`` (s).
    ``initial_frequency`` (Hz): the oscillator's starting guess.
    ``coupling`` K and ``learning_rate`` eta (1/s) act on the signal divided by
    its largest per-axis range. ``settle_tolerance``: relative to that range.
    The record must span at least ``eval_cycles`` cycles after settling for
    the reported error to be meaningful.
    """
    y = np.ascontiguousarray(samples, dtype=np.float64)
    if y.ndim != 2 or y.shape[1] != 3 or y.shape[0] < 2:
        raise ValueError(f"learn_pattern: samples must be an (n, 3) array, got shape {y.shape}")
    if not np.all(np.isfinite(y)):
        raise ValueError("learn_pattern: samples must be finite")
    dt = _number("dt", dt)
    f0 = _number("initial_frequency", initial_frequency)
    coupling = _number("coupling", coupling)
    rate = _number("learning_rate", learning_rate)
    if isinstance(n_harmonics, bool) or not isinstance(n_harmonics, (int, np.integer)) or not 1 <= n_harmonics <= 32:
        raise ValueError(f"learn_pattern: n_harmonics must be an integer in [1, 32], got {n_harmonics!r}")
    scale = float(np.max(np.ptp(y, axis=0)))
    if scale <= 0:
        raise ValueError("learn_pattern: samples must move (all axes are constant)")
    n = y.shape[0]
    win = max(1, int(round(window / dt)))
    n_win = n // win
    if n_win < 2:
        raise ValueError(f"learn_pattern: the record ({n * dt:g} s) must span at least two windows of {window:g} s")
    state = np.array([0.0, 2.0 * math.pi * f0])
    alpha = np.zeros((3, n_harmonics + 1))
    beta = np.zeros((3, n_harmonics + 1))
    freq_hist = np.zeros(n_win)
    err_hist = np.zeros((n_win, 3))
    max_hist = np.zeros((n_win, 3))
    _afo_learn(y / scale, dt, coupling, rate, state, alpha, beta, win, freq_hist, err_hist, max_hist)
    freq_hz = freq_hist / win / (2.0 * math.pi)
    err_rms = np.sqrt(err_hist / win) * scale
    omega = float(state[1])
    if not omega > 0.0:
        raise ValueError(f"learn_pattern: the oscillator ended at a non-positive frequency {omega / (2 * math.pi):g} Hz "
                         f"(initial_frequency {f0:g} Hz); try a guess closer to the reference or a smaller "
                         f"learning_rate")
    tail = int(math.ceil(eval_cycles * 2.0 * math.pi / (abs(omega) * win * dt)))
    if tail >= n_win:
        raise ValueError(f"learn_pattern: the record ({n * dt:g} s) is shorter than eval_cycles = {eval_cycles} "
                         f"cycles at the learned {omega / (2 * math.pi):.3g} Hz")
    omega = float(np.mean(freq_hist[-tail:])) / win
    rms_error = np.sqrt(np.sum(err_hist[-tail:], axis=0) / (tail * win)) * scale
    max_error = np.max(max_hist[-tail:], axis=0) * scale
    bad = np.nonzero(np.max(err_rms, axis=1) >= settle_tolerance * scale)[0]
    settling = 0.0 if bad.size == 0 else (math.inf if bad[-1] == n_win - 1 else (bad[-1] + 1) * win * dt)
    shift = phase_origin(alpha, beta)
    cos, sin = rotate_phase(alpha * scale, beta * scale, shift)
    sin[:, 0] = 0.0
    sin[2, 1] = 0.0  # b_z1 = 0 defines the phase origin: exact, not to rounding
    phase_end = float(state[0]) - shift
    phase_at_start = (phase_end - omega * n * dt) % (2.0 * math.pi)
    pattern = ChewingPattern(name, omega / (2.0 * math.pi), cos, sin, description, tuple(sources), None, {
        "learning": {"method": "adaptive-frequency phase oscillator with Fourier feedback (Petric et al. 2011)",
                     "coupling_per_s": coupling, "learning_rate_per_s": rate, "dt_s": dt, "duration_s": n * dt,
                     "initial_frequency_hz": f0, "n_harmonics": int(n_harmonics),
                     "online_rms_error_m": rms_error.tolist(), "online_max_error_m": max_error.tolist(),
                     "settling_time_s": settling if math.isfinite(settling) else None},
    })
    return LearningResult(pattern, freq_hz, err_rms, win * dt, rms_error, max_error, settling, phase_at_start)


def learn_cycle(cycle, frequency: float, *, initial_frequency: float, duration: float = 60.0, dt: float = 1e-3,
                **options) -> LearningResult:
    """Learn from one reference cycle (N, 3) sampled at phases ``2 pi i / N``, repeated at ``frequency`` Hz.

    The cycle is played for ``duration`` s at interval ``dt`` through its
    periodic cubic spline and learned by :func:`learn_pattern` (``options``
    are passed on) from ``initial_frequency``. The returned pattern carries
    the reference resampled at its own phases ``2 pi i / N`` and, in
    ``metadata["fit"]``, the RMS and largest error of the series against it
    and the fraction of the given cycle at pattern phase 0.
    """
    from scipy.interpolate import CubicSpline

    cyc = np.asarray(cycle, dtype=np.float64)
    if cyc.ndim != 2 or cyc.shape[1] != 3 or cyc.shape[0] < 8 or not np.all(np.isfinite(cyc)):
        raise ValueError(f"learn_cycle: cycle must be a finite (N, 3) array with N >= 8, got shape {cyc.shape}")
    f = _number("frequency", frequency)
    duration = _number("duration", duration)
    dt = _number("dt", dt)
    n = cyc.shape[0]
    spline = CubicSpline(np.arange(n + 1) / n, np.vstack([cyc, cyc[:1]]), bc_type="periodic", axis=0)
    t = np.arange(int(round(duration / dt))) * dt
    result = learn_pattern(spline((f * t) % 1.0), dt, initial_frequency=initial_frequency, **options)
    p = result.pattern
    # pattern phase psi(t) = phase_at_start + 2 pi f_learned t  <->  reference cycle fraction f t
    psi = 2.0 * math.pi * np.arange(n) / n
    tau = ((psi - result.phase_at_start) / (2.0 * math.pi) * f / p.frequency) % 1.0
    reference = spline(tau)
    pattern = ChewingPattern(p.name, p.frequency, p.cos, p.sin, p.description, p.sources, reference, p.metadata)
    rms, peak = pattern.fit_error()
    meta = dict(p.metadata)
    meta["fit"] = {"reference_samples": n, "rms_error_m": rms.tolist(), "max_error_m": peak.tolist(),
                   "reference_fraction_at_psi0": float(tau[0])}
    pattern = ChewingPattern(p.name, p.frequency, p.cos, p.sin, p.description, p.sources, reference, meta)
    return LearningResult(pattern, result.frequency_history, result.error_history, result.window,
                          result.rms_error, result.max_error, result.settling_time, result.phase_at_start)


def build_reference_pattern(name: str) -> ChewingPattern:
    """Learn the shipped pattern ``name`` from its reference cycle (what the data files hold)."""
    if name not in REFERENCE_CYCLES:
        raise ValueError(f"unknown reference cycle {name!r}; available: {list(REFERENCE_CYCLES)}")
    c = REFERENCE_CYCLES[name]
    s = SHIPPED_LEARNING
    result = learn_cycle(reference_samples(name, s["cycle_samples"]), c["frequency_hz"],
                         initial_frequency=s["initial_frequency"], duration=s["duration"], dt=s["dt"],
                         n_harmonics=s["n_harmonics"], coupling=s["coupling"], learning_rate=s["learning_rate"],
                         name=name, description=c["description"], sources=c["sources"])
    p = result.pattern
    meta = dict(p.metadata)
    meta["reference_model"] = {"function": "rtctl.loops.cpg.patterns.teardrop_cycle",
                               **{k: c[k] for k in ("frequency_hz", *TEARDROP_PARAMETERS)}}
    meta["kinematics"] = p.kinematics()
    return ChewingPattern(p.name, p.frequency, p.cos, p.sin, p.description, p.sources, p.reference, meta)
