"""The chewing CPG: learned patterns played by coupled Hopf oscillators, modulated online within limits.

:class:`ChewingCPG` owns the preallocated state of :mod:`loops.cpg.oscillators`
(three phase-coupled Hopf oscillators, one per axis of the incisal point, each
playing its axis of the learned Fourier shape scaled by its amplitude) and a
library of :class:`~loops.cpg.patterns.ChewingPattern` (the shipped ones plus
any added). Each control cycle :meth:`ChewingCPG.step` makes one compiled
call that advances the oscillators by ``dt`` and writes the incisal point
displacement from occlusion ``p`` (m; lateral x, anterior-posterior y,
vertical z up, opening negative), ``pd`` (m/s), ``pdd`` (m/s^2) and ``pjerk``
(m/s^3) into arrays that stay the same objects for the generator's life.

The oscillators have a stable limit cycle: a perturbation of an amplitude
decays at the rate ``2 gamma`` (H1, H3) and a perturbation of the phase
differences at the rate ``3 k`` (H2, H4), so the output returns to the
learned cycle by itself; :meth:`~ChewingCPG.perturb` applies one.
:meth:`~ChewingCPG.set_feedback` feeds a sensory signal (bite force or
tracking error) into the phase (H2, H5): positive values hold the jaw longer
around occlusion, negative ones hurry it.

Modulation (:meth:`~ChewingCPG.set_frequency`, :meth:`~ChewingCPG.set_amplitude`,
:meth:`~ChewingCPG.set_pattern`, :meth:`~ChewingCPG.stop`) only changes
*targets*: the frequency reaches its target through the fourth-order filter
(O3) of ``omega`` and the phase integrates it (O2, O7); a new amplitude scale
or pattern becomes new target coefficients ``scale_j * (a_jk, b_jk)`` reached
through the same filter per coefficient, so the pattern is blended coefficient
by coefficient; a new pattern keeps the running frequency unless one is given. Position, velocity, acceleration and jerk stay continuous
whatever the requests and whenever they come. With the default filter rate
``lambda = 10/s`` the remaining fraction of a target step,
``exp(-s) (1 + s + s^2/2 + s^3/6)`` at ``s = lambda t``, is 1.0e-2 after
1.0 s and 9.3e-5 after 1.6 s.

Before a request is accepted its outcome is predicted and checked against
the :class:`~loops.cpg.limits.TherapistLimits`: the frequency range, and the
largest opening and incisal speed over (a) the steady cycle of the new
targets (4096 phases) and (b) the transition from the current state,
simulated by the same compiled step at 1 kHz until the filters have settled
(``20 / lambda`` s plus one cycle; the filters' remaining weight is then
below 4e-6). The sampled extremes are enlarged by 0.1 % to bound the peaks
between samples (at 2 Hz a peak of the fourth harmonic falls at most
``(4 omega dt)^2 / 8 = 3e-4`` below its largest 1 kHz sample), so the
envelope is an upper bound. A request that would break a limit raises
:class:`~loops.cpg.limits.Refused` with the reason and leaves the targets
unchanged.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .limits import Envelope, Refused, TherapistLimits
from .oscillators import (
    BAD_DT, OK, ST_COUPLING, ST_FEEDBACK_GAIN, ST_FEEDBACK_STAGE, ST_FEEDBACK_TARGET, ST_GAMMA, ST_LEN, ST_OFFSET,
    ST_OMEGA, ST_OMEGA_STAGE, ST_OMEGA_TARGET, ST_PHASE, ST_PHASE_RATE, ST_RADIUS, ST_RATE_COEF, ST_RATE_FEEDBACK,
    ST_RATE_OMEGA, ST_TIME, cpg_step, simulate_extremes,
)
from .patterns import ChewingPattern, shipped_patterns

__all__ = ["DEFAULT_CONVERGENCE", "DEFAULT_COUPLING", "DEFAULT_FEEDBACK_RATE", "DEFAULT_FILTER_RATE", "ChewingCPG"]

DEFAULT_FILTER_RATE = 10.0
#: Hopf radial convergence ``gamma`` (1/s): amplitude errors decay at 2 gamma = 8/s (1 % left after 0.58 s).
DEFAULT_CONVERGENCE = 4.0
#: Phase coupling ``k`` (1/s): phase-difference errors decay at 3 k = 6/s (1 % left after 0.77 s).
DEFAULT_COUPLING = 2.0
#: ``lambda`` (1/s) of the feedback filter: a bite-force signal is smoothed over ~0.2 s.
DEFAULT_FEEDBACK_RATE = 20.0
#: Negative feedback may advance the phase by at most this fraction of ``omega`` (``sigma u >= -0.2 omega``),
#: so the speed envelope checked against the therapist's limits holds (steady cycle at 1.2 x the frequency).
MAX_FEEDBACK_ADVANCE = 0.2
MAX_FEEDBACK_HOLD = 2.0      # sigma u at most 2 omega: the phase held at 3 pi / 2 (closing side), a fixed point RK4 keeps
PREDICTION_DT = 1e-3
PREDICTION_SETTLE = 20.0
PREDICTION_MARGIN = 1e-3


@dataclass(frozen=True)
class Modulation:
    """A checked modulation request (:meth:`ChewingCPG.check_request`), ready for :meth:`ChewingCPG.apply`."""

    pattern: ChewingPattern
    frequency: float
    amplitude_scale: np.ndarray
    envelope: Envelope
    request: str
    coef: np.ndarray   # the target Fourier coefficients (pattern x amplitude scale), ready to copy


def _non_negative(name, value):
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"ChewingCPG: {name} must be a number, got {value!r}") from None
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"ChewingCPG: {name} must be finite and >= 0, got {value!r}")
    return x


def _rate(name, value):
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"ChewingCPG: {name} must be a number, got {value!r}") from None
    if not math.isfinite(x) or x <= 0:
        raise ValueError(f"ChewingCPG: {name} must be finite and > 0, got {value!r}")
    return x


class ChewingCPG:
    """Chewing-pattern generator for the incisal point (module docstring).

    ``pattern``: a name from :attr:`patterns` or a :class:`ChewingPattern`;
    ``frequency`` (Hz, default the pattern's own); ``amplitude_scale``: per
    axis (x, y, z) or one number; ``limits``: :class:`TherapistLimits`
    (default: the healthy-adult envelope); ``library``: extra patterns (a
    mapping name -> pattern or an iterable of patterns); ``harmonics``: the
    number of harmonics held (default: the most of any pattern in the
    library); ``filter_rate``/``frequency_filter_rate``: ``lambda`` (1/s) of
    the coefficient and frequency filters. ``start_at_rest``: the output
    starts at occlusion with zero velocity and ramps into the cycle through
    the filters (else it starts on the steady cycle at phase 0).
    ``convergence``: ``gamma`` (1/s) of the Hopf amplitudes (H1);
    ``coupling``: ``k`` (1/s) of the phase coupling (H2); ``phase_offsets``:
    ``delta`` (rad) per axis, the phase differences the axes lock to (0: the
    pattern's own timing); ``feedback_gain``: ``sigma`` (rad/s per unit of
    feedback, 0: feedback ignored); ``feedback_filter_rate``: ``lambda``
    (1/s) of the feedback filter.
    The initial request is checked like any other and may raise :class:`Refused`.

    ``p``, ``pd``, ``pdd``, ``pjerk`` are (3,) views into one (4, 3) array
    ``output``. A compiled loop can call the kernel itself:
    ``cpg_step(dt, *cpg.kernel_args)`` (returns 0 when OK).
    """

    def __init__(self, pattern="normal", frequency=None, amplitude_scale=(1.0, 1.0, 1.0),
                 limits: TherapistLimits | None = None, *, library=None, harmonics: int | None = None,
                 filter_rate: float = DEFAULT_FILTER_RATE, frequency_filter_rate: float = DEFAULT_FILTER_RATE,
                 start_at_rest: bool = True, convergence: float = DEFAULT_CONVERGENCE,
                 coupling: float = DEFAULT_COUPLING, phase_offsets=(0.0, 0.0, 0.0), feedback_gain: float = 0.0,
                 feedback_filter_rate: float = DEFAULT_FEEDBACK_RATE):
        if limits is not None and not isinstance(limits, TherapistLimits):
            raise ValueError(f"ChewingCPG: limits must be a TherapistLimits, got {type(limits).__name__}")
        self._limits = TherapistLimits() if limits is None else limits
        self._library: dict[str, ChewingPattern] = dict(shipped_patterns())
        if library is not None:
            for p in (library.values() if isinstance(library, Mapping) else library):
                self._register(p)
        if isinstance(pattern, ChewingPattern):
            self._register(pattern)
        if harmonics is None:
            harmonics = max(p.n_harmonics for p in self._library.values())
        if isinstance(harmonics, bool) or not isinstance(harmonics, (int, np.integer)) or harmonics < 1:
            raise ValueError(f"ChewingCPG: harmonics must be an integer >= 1, got {harmonics!r}")
        self.harmonics = int(harmonics)
        self._st = np.zeros(ST_LEN)
        self._st[ST_RATE_COEF] = _rate("filter_rate", filter_rate)
        self._st[ST_RATE_OMEGA] = _rate("frequency_filter_rate", frequency_filter_rate)
        self._st[ST_GAMMA] = _rate("convergence", convergence)
        self._st[ST_COUPLING] = _non_negative("coupling", coupling)
        self._st[ST_FEEDBACK_GAIN] = _non_negative("feedback_gain", feedback_gain)
        self._st[ST_RATE_FEEDBACK] = _rate("feedback_filter_rate", feedback_filter_rate)
        offsets = np.broadcast_to(np.asarray(phase_offsets, dtype=np.float64), (3,)) \
            if np.ndim(phase_offsets) <= 1 and np.size(phase_offsets) in (1, 3) else None
        if offsets is None or not np.all(np.isfinite(offsets)):
            raise ValueError(f"ChewingCPG: phase_offsets must be 3 finite angles (rad), got {phase_offsets!r}")
        self._st[ST_OFFSET:ST_OFFSET + 3] = offsets
        self._coef = np.zeros((5, 3, 2 * self.harmonics + 1))
        self.output = np.zeros((4, 3))
        self.p, self.pd, self.pdd, self.pjerk = self.output
        self.kernel_args = (self._st, self._coef, self.output)
        target = self._resolve(pattern)
        f = self._limits.check_frequency(target.frequency if frequency is None else frequency)
        scale = self._limits.check_amplitude(amplitude_scale)
        self._set_state(target.packed(self.harmonics) * scale[:, None], f, at_rest=bool(start_at_rest))
        self._commit(target, f, scale, "initial request", "pattern", target.name)

    # -- per cycle ---------------------------------------------------------------------
    def step(self, dt: float) -> None:
        """Advance by ``dt`` s (>= 0) and write ``p``, ``pd``, ``pdd``, ``pjerk``; allocation-free compiled call."""
        try:
            status = cpg_step(dt, self._st, self._coef, self.output)
        except TypeError:
            raise ValueError(f"ChewingCPG.step: dt must be a number (s), got {dt!r}") from None
        if status != OK:
            if status == BAD_DT:
                raise ValueError(f"ChewingCPG.step: dt must be finite and >= 0 s, got {dt!r}")
            raise ValueError(f"ChewingCPG.step: internal state arrays have the wrong shape (status {status})")

    # -- modulation --------------------------------------------------------------------
    def set_frequency(self, frequency) -> None:
        """New chewing frequency target (Hz); :class:`Refused` if outside the limits or the predicted envelope is."""
        f = self._limits.check_frequency(frequency)
        self._commit(self._pattern, f, self._scale, f"frequency {f:g} Hz", "frequency", f)

    def set_amplitude(self, scale) -> None:
        """New per-axis amplitude scale of the pattern (x, y, z, or one number); :class:`Refused` if the
        predicted opening or speed breaks the limits."""
        sc = self._limits.check_amplitude(scale)
        self._commit(self._pattern, self._frequency, sc, f"amplitude scale {sc.tolist()}", "amplitude_scale",
                     sc.tolist())

    def set_pattern(self, pattern, frequency=None) -> None:
        """Blend into ``pattern`` (a name or a :class:`ChewingPattern`, added to the library) at ``frequency``
        (Hz; default: the running target frequency, kept through the switch), keeping the amplitude scale;
        :class:`Refused` if not executable."""
        target = self._resolve(pattern)
        if isinstance(pattern, ChewingPattern):
            self._register(pattern)
        f = self._limits.check_frequency(self._frequency if frequency is None else frequency)
        self._commit(target, f, self._scale, f"pattern {target.name!r} at {f:g} Hz", "pattern", target.name)

    def stop(self) -> None:
        """Return smoothly to occlusion at rest (amplitude scale 0 on every axis)."""
        self.set_amplitude(0.0)

    def set_limits(self, limits: TherapistLimits) -> None:
        """New therapist limits; :class:`Refused` if the current targets or their transition break them."""
        if not isinstance(limits, TherapistLimits):
            raise ValueError(f"ChewingCPG.set_limits: limits must be a TherapistLimits, got {type(limits).__name__}")
        try:
            limits.check_frequency(self._frequency)
            env = self.predict()
            limits.check_envelope(env, "current targets", "limits", limits.to_dict())
        except Refused as exc:
            raise Refused(f"new limits refused, the running cycle breaks them: {exc.reason}", "limits",
                          limits.to_dict(), exc.limit) from None
        self._limits = limits

    def add_pattern(self, pattern: ChewingPattern) -> None:
        """Make ``pattern`` selectable by name (replaces a pattern of the same name unless it is running)."""
        if not isinstance(pattern, ChewingPattern):
            raise ValueError(f"ChewingCPG.add_pattern: pattern must be a ChewingPattern, got {type(pattern).__name__}")
        if pattern.n_harmonics > self.harmonics:
            raise Refused(f"pattern {pattern.name!r} has {pattern.n_harmonics} harmonics, this CPG holds "
                          f"{self.harmonics}", "pattern", pattern.name, self.harmonics)
        if pattern.name == self._pattern.name and pattern is not self._pattern:
            raise Refused(f"pattern {pattern.name!r} is running; select another pattern before replacing it",
                          "pattern", pattern.name)
        self._library[pattern.name] = pattern

    def predict(self, frequency=None, amplitude_scale=None, pattern=None) -> Envelope:
        """Envelope of the steady cycle and of the transition that the given targets (default: the current
        ones) would produce from the current state. Does not check the limits or change anything."""
        target = self._pattern if pattern is None else self._resolve(pattern)
        f = self._frequency if frequency is None else _rate("predict frequency (Hz)", frequency)
        sc = self._scale if amplitude_scale is None else self._limits.check_amplitude(amplitude_scale)
        return self._predict(target, f, sc)

    # -- feedback and perturbation -------------------------------------------------------
    def set_feedback(self, value: float) -> None:
        """The sensory feedback ``u`` (bite force in N, or tracking error in m: the unit ``feedback_gain`` is
        per) that the phase follows from the next step on (H2, through its filter); allocation-free, for
        every control cycle. It is limited to ``-0.2 omega <= sigma u <= 2 omega`` (at most 20 % faster; at most
        held at 3 pi / 2, before occlusion: a far larger value would step the phase past its fixed point)."""
        u = float(value)
        if not math.isfinite(u):
            raise ValueError(f"ChewingCPG.set_feedback: value must be finite, got {value!r}")
        sigma = self._st[ST_FEEDBACK_GAIN]
        if sigma > 0.0:   # sigma u in [-0.2 omega, 2 omega]: at most 20 % faster, at most held before occlusion
            omega = self._st[ST_OMEGA_TARGET]
            u = min(max(u, -MAX_FEEDBACK_ADVANCE * omega / sigma), MAX_FEEDBACK_HOLD * omega / sigma)
        self._st[ST_FEEDBACK_TARGET] = u

    def perturb(self, phase=(0.0, 0.0, 0.0), radius=None) -> None:
        """Kick the oscillators off their limit cycle: add ``phase`` (rad, per axis or one number) to the
        phases and set the amplitudes ``radius`` (> 0, per axis or one number; default unchanged). The
        output jumps; the oscillators return to the cycle by themselves (H1-H4). For tests and
        demonstrations, not while a robot follows the output."""
        dphi = np.broadcast_to(np.asarray(phase, dtype=np.float64), (3,))
        if not np.all(np.isfinite(dphi)):
            raise ValueError(f"ChewingCPG.perturb: phase must be finite (rad), got {phase!r}")
        if radius is not None:
            r = np.broadcast_to(np.asarray(radius, dtype=np.float64), (3,))
            if not np.all(np.isfinite(r)) or np.any(r <= 0):
                raise ValueError(f"ChewingCPG.perturb: radius must be finite and > 0, got {radius!r}")
            self._st[ST_RADIUS:ST_RADIUS + 3] = r
        self._st[ST_PHASE:ST_PHASE + 3] += dphi
        self.step(0.0)

    @property
    def phases(self) -> np.ndarray:
        """Phase of each axis' oscillator (rad; a copy). Axis 0 is wrapped to [0, 2 pi), the others by the
        same whole turns, so their differences are continuous."""
        return self._st[ST_PHASE:ST_PHASE + 3].copy()

    @property
    def phase_rates(self) -> np.ndarray:
        """``theta_i'`` (rad/s) of each axis at the last step (a copy)."""
        return self._st[ST_PHASE_RATE:ST_PHASE_RATE + 3].copy()

    @property
    def radii(self) -> np.ndarray:
        """Amplitude ``r_i`` of each Hopf oscillator (1 on the limit cycle; a copy)."""
        return self._st[ST_RADIUS:ST_RADIUS + 3].copy()

    @property
    def feedback(self) -> float:
        """The filtered feedback ``u`` the phase follows."""
        return float(self._st[ST_FEEDBACK_STAGE + 3])

    @property
    def oscillator_parameters(self) -> dict:
        """``convergence`` gamma (1/s), ``coupling`` k (1/s), ``phase_offsets`` delta (rad), ``feedback_gain``
        sigma and ``feedback_filter_rate`` (1/s)."""
        st = self._st
        return {"convergence": float(st[ST_GAMMA]), "coupling": float(st[ST_COUPLING]),
                "phase_offsets": st[ST_OFFSET:ST_OFFSET + 3].tolist(), "feedback_gain": float(st[ST_FEEDBACK_GAIN]),
                "feedback_filter_rate": float(st[ST_RATE_FEEDBACK])}

    def reset(self, at_rest: bool = True) -> None:
        """Restart at phase 0 (each axis at its offset), amplitudes on the cycle, no feedback, with the
        frequency filter settled on its target; coefficients at rest (zero, the
        output ramps in from occlusion) or, with ``at_rest=False``, on their targets. This is a jump of the
        state: use it only while the robot is not following the output."""
        saved = self._st.copy(), self._coef.copy()
        self._set_state(self._coef[0].copy(), self._frequency, at_rest=bool(at_rest))
        try:
            self._commit(self._pattern, self._frequency, self._scale, "reset", "pattern", self._pattern.name)
        except Refused:
            self._st[:], self._coef[:] = saved
            self.step(0.0)
            raise

    # -- state -------------------------------------------------------------------------
    @property
    def patterns(self) -> tuple[str, ...]:
        """Names of the selectable patterns."""
        return tuple(sorted(self._library))

    @property
    def limits(self) -> TherapistLimits:
        return self._limits

    @property
    def pattern(self) -> ChewingPattern:
        """The target pattern (unscaled)."""
        return self._pattern

    @property
    def target_frequency(self) -> float:
        """Target chewing frequency (Hz)."""
        return self._frequency

    @property
    def amplitude_scale(self) -> tuple[float, float, float]:
        """Target amplitude scale per axis (x, y, z)."""
        return tuple(float(s) for s in self._scale)

    @property
    def targets(self) -> dict:
        """The current targets: pattern name, frequency (Hz) and amplitude scale."""
        return {"pattern": self._pattern.name, "frequency": self._frequency, "amplitude_scale": list(self.amplitude_scale)}

    @property
    def envelope(self) -> Envelope:
        """Predicted envelope accepted with the current targets (steady cycle and transition)."""
        return self._envelope

    @property
    def frequency(self) -> float:
        """Instantaneous (filtered) frequency (Hz)."""
        return float(self._st[ST_OMEGA]) / (2.0 * math.pi)

    @property
    def phase(self) -> float:
        """Cycle phase (rad, in [0, 2 pi)) of the lateral axis' oscillator, which all axes lock to (minus their
        offsets); 0 is the closed side of the cycle."""
        return float(self._st[ST_PHASE])

    @property
    def time(self) -> float:
        """Time integrated since the last reset (s)."""
        return float(self._st[ST_TIME])

    @property
    def filter_rates(self) -> tuple[float, float]:
        """``lambda`` (1/s) of the coefficient and of the frequency filter."""
        return float(self._st[ST_RATE_COEF]), float(self._st[ST_RATE_OMEGA])

    def __repr__(self):
        return (f"ChewingCPG(pattern={self._pattern.name!r}, frequency={self._frequency:g} Hz, "
                f"amplitude_scale={list(self.amplitude_scale)})")

    # -- internals -----------------------------------------------------------------------
    def _register(self, pattern):
        if not isinstance(pattern, ChewingPattern):
            raise ValueError(f"ChewingCPG: library entries must be ChewingPattern, got {type(pattern).__name__}")
        self._library[pattern.name] = pattern

    def _resolve(self, pattern) -> ChewingPattern:
        if isinstance(pattern, ChewingPattern):
            target = pattern
        elif isinstance(pattern, str):
            if pattern not in self._library:
                raise Refused(f"unknown pattern {pattern!r}; available: {list(self.patterns)}", "pattern", pattern)
            target = self._library[pattern]
        else:
            raise Refused(f"pattern must be a name or a ChewingPattern, got {pattern!r}", "pattern", pattern)
        held = getattr(self, "harmonics", None)
        if held is not None and target.n_harmonics > held:
            raise Refused(f"pattern {target.name!r} has {target.n_harmonics} harmonics, this CPG holds {held}",
                          "pattern", target.name, held)
        return target

    def _set_state(self, target_coef, frequency, at_rest):
        w = 2.0 * math.pi * frequency
        self._st[ST_PHASE:ST_PHASE + 3] = self._st[ST_OFFSET:ST_OFFSET + 3]
        self._st[ST_RADIUS:ST_RADIUS + 3] = 1.0
        self._st[ST_FEEDBACK_STAGE:ST_FEEDBACK_TARGET + 1] = 0.0
        self._st[ST_TIME] = 0.0
        self._st[ST_OMEGA_TARGET] = w
        self._st[ST_OMEGA_STAGE:ST_OMEGA_STAGE + 4] = w
        self._coef[0] = target_coef
        self._coef[1:] = 0.0 if at_rest else target_coef
        self.step(0.0)

    def _predict(self, target, frequency, scale) -> Envelope:
        st, coef = self._st.copy(), self._coef.copy()
        out, ext = np.zeros((4, 3)), np.zeros(4)
        coef[0] = target.packed(self.harmonics) * scale[:, None]
        st[ST_OMEGA_TARGET] = 2.0 * math.pi * frequency
        horizon = PREDICTION_SETTLE / min(st[ST_RATE_COEF], st[ST_RATE_OMEGA]) + 1.0 / frequency
        status = simulate_extremes(PREDICTION_DT, int(math.ceil(horizon / PREDICTION_DT)), st, coef, out, ext)
        if status != OK:
            raise ValueError(f"ChewingCPG: envelope prediction failed (status {status})")
        env = target.envelope(frequency, scale).union(Envelope(*(float(x) for x in ext)))
        if st[ST_FEEDBACK_GAIN] > 0.0:
            env = env.union(target.envelope(frequency * (1.0 + MAX_FEEDBACK_ADVANCE), scale))
        return Envelope(*(x * (1.0 + PREDICTION_MARGIN) for x in env.as_tuple()))

    def check_request(self, frequency=None, amplitude_scale=None, pattern=None) -> "Modulation":
        """Check a combined modulation (any of frequency, per-axis amplitude scale, pattern; a new pattern
        runs at ``frequency`` or the running one) against the limits and the predicted envelope, without changing
        anything. Returns a :class:`Modulation` for :meth:`apply`; raises :class:`Refused` with the reason.

        This is how a control channel modulates a running CPG: the expensive check (a few ms of
        prediction) runs in its own thread, :meth:`apply` in the loop's thread writes the targets only.
        """
        target = self._pattern if pattern is None else self._resolve(pattern)
        if frequency is None:
            frequency = self._frequency
        f = self._limits.check_frequency(frequency)
        sc = self._scale if amplitude_scale is None else self._limits.check_amplitude(amplitude_scale)
        parts = [f"pattern {target.name!r}" if pattern is not None else "",
                 f"frequency {f:g} Hz", f"amplitude scale {np.asarray(sc).tolist()}"]
        request = ", ".join(x for x in parts if x)
        field = "pattern" if pattern is not None else "amplitude_scale" if amplitude_scale is not None \
            else "frequency"
        value = {"pattern": target.name, "amplitude_scale": np.asarray(sc).tolist(), "frequency": f}[field]
        env = self._predict(target, f, sc)
        self._limits.check_envelope(env, request, field, value)
        sc = np.array(sc, dtype=np.float64)
        return Modulation(target, f, sc, env, request, target.packed(self.harmonics) * sc[:, None])

    def apply(self, modulation: "Modulation") -> str:
        """Write the targets of a checked :class:`Modulation` (copies only, no prediction); returns its text."""
        target = modulation.pattern
        if target.name not in self._library:
            self._register(target)
        self._coef[0] = modulation.coef
        self._st[ST_OMEGA_TARGET] = 2.0 * math.pi * modulation.frequency
        self._pattern, self._frequency = target, modulation.frequency
        self._scale, self._envelope = modulation.amplitude_scale, modulation.envelope
        return modulation.request

    def _commit(self, target, frequency, scale, request, field, value):
        env = self._predict(target, frequency, scale)
        self._limits.check_envelope(env, request, field, value)
        sc = np.array(scale, dtype=np.float64)
        self.apply(Modulation(target, float(frequency), sc, env, request, target.packed(self.harmonics) * sc[:, None]))
