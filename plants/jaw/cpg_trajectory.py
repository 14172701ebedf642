"""The chewing CPG as the jaw-rehabilitation robot's trajectory: CPG -> incisal point -> platform pose -> legs.

:class:`JawCPGTrajectory` (kind ``"jaw_cpg"``) advances the :class:`ChewingCPG`
(coupled Hopf oscillators with the learned Fourier shape as output,
:mod:`rtctl.loops.cpg.oscillators`) by the control period and maps its incisal-point output (p, p-dot, p-ddot)
through :meth:`rtctl.plants.jaw.model.JawRehabRobot.incisal_to_legs` (the
opening hinge rotation plus translation, then the leg inverse kinematics and
its derivatives) to the desired leg lengths, rates and accelerations -- both
in one compiled, allocation-free call per cycle. Smoothness of the legs under
online changes follows from the CPG's filtered targets and the smooth IK.

Modulation from the control channel (``set_cpg`` with ``frequency`` in Hz,
``amplitude`` as one scale or three per-axis scales [lateral, anterior,
vertical], ``pattern`` by name) is checked by :meth:`validate_cpg_request` in
the channel's thread -- therapist limits and the predicted envelope of the
transition -- and applied at a cycle boundary by writing the targets only; a
new pattern keeps the running frequency.

Sensory feedback modulates the phase (eq. H2 of :mod:`rtctl.loops.cpg.oscillators`):
``feedback_gain`` (rad/s per unit) scales it; ``feedback_source`` chooses it:
``"external"`` -- whatever calls :meth:`JawCPGTrajectory.set_feedback` each
cycle (a bite-force observer, in N); ``"tracking_error"`` -- the norm of the
leg tracking error ``|q_d - q|`` (m), measured by the loop hook
:class:`LegTrackingFeedback` that :meth:`JawCPGTrajectory.add_loop_hooks` adds to
the loop: a robot held back by the patient slows the rhythm around occlusion
instead of pulling harder; ``"bite_force"`` -- the bite force (N) the ``[bite]``
monitor estimates (:class:`BiteForceFeedback`; needs ``[bite] enabled``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from rtctl.plants.jaw import kernels as _jk
from rtctl.plants.jaw.bite import BiteMonitor
from rtctl.plants.jaw.model import STATUS_REASONS, JawRehabRobot

from rtctl.loops.base import Trajectory
from rtctl.options import OptionsBase, options_of, setting
from rtctl.loops.cpg.generator import DEFAULT_CONVERGENCE, DEFAULT_COUPLING, ChewingCPG
from rtctl.loops.cpg.limits import Refused, TherapistLimits
from rtctl.loops.cpg.oscillators import cpg_step

__all__ = ["FEEDBACK_SOURCES", "JawCPGTrajectory", "LegTrackingFeedback"]

FEEDBACK_SOURCES = ("external", "tracking_error", "bite_force")


@njit(cache=True)
def _cpg_legs(dt, st, coef, out, pts2, P, l, ld, ldd, W, V):
    """One cycle: advance the CPG by ``dt``, then the legs of its incisal motion. 0, or the failing status:
    -1 - the CPG's code, or the mechanism's (positive, :data:`rtctl.plants.jaw.model.STATUS_REASONS`)."""
    status = cpg_step(dt, st, coef, out)
    if status != 0:
        return -1 - status
    return _jk.incisal_to_legs(pts2, P, out[0], out[1], out[2], l, ld, ldd, W, V)


@dataclass(frozen=True)
class TherapistOptions:
    """``[therapist]``: limits checked before a CPG request is accepted (:class:`TherapistLimits`)."""

    max_opening: float = setting("float", 0.045, positive=True, high=0.06)   # m of vertical incisal opening
    max_speed: float = setting("float", 0.15, positive=True)                  # m/s of the incisal point
    min_frequency: float = setting("float", 0.5, positive=True)               # Hz
    max_frequency: float = setting("float", 2.0, positive=True)               # Hz
    max_force: float = setting("float", None, positive=True)                  # N per leg: lowers the effort clamp


class JawCPGTrajectory(Trajectory):
    """Desired leg motion of the jaw robot from the chewing CPG (module docstring).

    Parameters
    ----------
    pattern : a shipped pattern name (``normal``, ``hard_food``, ``lateral_grinding``) or a ChewingPattern.
    frequency : Hz (default: the pattern's own).
    amplitude : per-axis amplitude scale (one number or 3).
    limits : :class:`TherapistLimits` or a dict of its fields (default limits otherwise).
    t0 : control time (s) at which chewing starts; before it the legs hold the rest pose. The CPG starts at
        rest and its amplitude filters ramp the cycle in smoothly.
    mechanism : the :class:`JawRehabRobot` (default geometry).
    coupling, convergence : ``k`` and ``gamma`` (1/s) of the oscillators (:class:`ChewingCPG`).
    feedback_gain, feedback_source : the phase feedback (module docstring).
    """

    sections = {"therapist": TherapistOptions}

    @dataclass(frozen=True)
    class Options(OptionsBase):
        pattern: str = setting("str", "normal")      # normal, hard_food, lateral_grinding
        frequency: float = setting("floats", None, positive=True)  # Hz, one value (default: the pattern's own)
        amplitude: object = setting("floats", 1.0)   # per-axis scale of the pattern (one number or 3)
        t0: float = setting("float", 0.0, low=0.0)
        coupling: float = setting("float", DEFAULT_COUPLING, low=0.0)          # 1/s, phase coupling k
        convergence: float = setting("float", DEFAULT_CONVERGENCE, positive=True)  # 1/s, Hopf gamma
        feedback_gain: float = setting("float", 0.0, low=0.0)                  # rad/s per unit of feedback
        feedback_source: str = setting("str", "external", choices=FEEDBACK_SOURCES)

    @classmethod
    def from_config(cls, options: dict, context):
        """With the ``[therapist]`` limits; ``max_force`` lowers the legs' effort limit, which the safety
        clamp enforces."""
        therapist = context.sections["therapist"]
        if isinstance(options["frequency"], list):
            raise ValueError("frequency: the chewing CPG has one frequency (Hz)")
        trajectory = cls(cls.Options(**options), limits={k: v for k, v in therapist.items() if v is not None})
        if therapist["max_force"] is not None:
            limit = context.model.effort_limit
            limit[context.v_index] = np.minimum(limit[context.v_index], therapist["max_force"])
        return trajectory

    def __init__(self, options: "JawCPGTrajectory.Options | None" = None, *, limits=None,
                 mechanism: JawRehabRobot | None = None):
        self.options = o = options_of(self, options)
        if isinstance(limits, dict):
            limits = TherapistLimits.from_dict(limits)
        self.mechanism = mechanism or JawRehabRobot()
        scale = np.broadcast_to(np.asarray(o.amplitude, dtype=float), (3,)).copy()
        self.feedback_source = o.feedback_source
        self.cpg = ChewingCPG(o.pattern, frequency=o.frequency, amplitude_scale=scale, limits=limits,
                              coupling=o.coupling, convergence=o.convergence, feedback_gain=o.feedback_gain)
        self.t0 = o.t0
        self.n = 6
        self.patterns = self.cpg.patterns
        self._t = self.t0
        self._rest = np.zeros(3)
        self._args = (*self.cpg.kernel_args, self.mechanism.pts2, self.mechanism.P)
        self._W, self._V = self.mechanism.W.copy(), self.mechanism.V.copy()
        self._l, self._ld, self._ldd = np.zeros(6), np.zeros(6), np.zeros(6)
        status = self.mechanism.incisal_to_legs(self._rest, self._rest, self._rest, self._l, self._ld, self._ldd)
        if status:
            raise ValueError(f"jaw_cpg: the rest pose is not reachable: {STATUS_REASONS.get(status, status)}")
        self.rest_legs = self._l.copy()

    @property
    def incisal(self) -> np.ndarray:
        """The CPG output of the last sample: rows p, p-dot, p-ddot, jerk (m, [lateral, anterior, vertical])."""
        return self.cpg.output

    def sample(self, t, q_d, qd_d, qdd_d) -> None:
        if t < self.t0:
            q_d[:] = self.rest_legs
            qd_d[:] = 0.0
            qdd_d[:] = 0.0
            return
        dt = t - self._t if t > self._t else 0.0
        self._t = t if t > self._t else self._t
        status = _cpg_legs(dt, *self._args, q_d, qd_d, qdd_d, self._W, self._V)
        if status != 0:
            if status < 0:
                raise ValueError(f"jaw_cpg: CPG step failed (status {-1 - status}) at t = {t:.6g} s")
            raise ValueError(f"jaw_cpg: the chewing motion left the workspace at t = {t:.6g} s: "
                             f"{STATUS_REASONS.get(status, status)}")

    def warm(self, cycle) -> None:
        """The CPG step and the legs' kinematics on copies of their state (a sample before ``t0`` calls no
        kernel; one after it would advance the CPG): :mod:`rtctl.rt.warmup`."""
        args = tuple(a.copy() if isinstance(a, np.ndarray) else a for a in self._args)
        _cpg_legs(cycle.dt, *args, cycle.q_d, cycle.qd_d, cycle.qdd_d, self._W.copy(), self._V.copy())

    def set_feedback(self, value: float) -> None:
        """The feedback the CPG phase follows (unit: what ``feedback_gain`` is per); allocation-free, for a
        loop hook or an observer to call every cycle."""
        self.cpg.set_feedback(value)

    def add_loop_hooks(self, loop) -> None:
        """Wire the chosen feedback into ``loop`` (idempotent): ``"tracking_error"`` adds the
        :class:`LegTrackingFeedback` hook, ``"bite_force"`` a :class:`BiteForceFeedback` reading the loop's
        bite monitor (ValueError when there is none)."""
        feedbacks = (LegTrackingFeedback, BiteForceFeedback)
        if any(isinstance(h, feedbacks) and h.trajectory is self for h in loop.hooks):
            return
        if self.feedback_source == "tracking_error":
            loop.hooks.append(LegTrackingFeedback(self, loop.q_d))
        elif self.feedback_source == "bite_force":
            monitors = [h for h in loop.hooks if isinstance(h, BiteMonitor)]
            if not monitors:
                raise ValueError("jaw_cpg: feedback_source = 'bite_force' needs the bite monitor: "
                                 "[bite] enabled = true with a jaw controller")
            loop.hooks.append(BiteForceFeedback(self, monitors[0]))

    def validate_cpg_request(self, req: dict):
        """Check a ``set_cpg`` request (fields ``frequency``, ``amplitude``, ``pattern``); returns
        ``(apply(loop) -> detail, cleaned request)``. Raises ValueError with the reason (limits, envelope,
        fields that do not apply to the CPG)."""
        foreign = sorted(set(req) & {"phase", "center"})
        if foreign:
            raise ValueError(f"set_cpg: '{foreign[0]}' does not apply to the chewing CPG "
                             "(it takes frequency, amplitude, pattern)")
        frequency = req.get("frequency")
        if isinstance(frequency, (list, tuple)):
            raise ValueError("frequency: the chewing CPG has one frequency (Hz), got a list")
        amplitude = req.get("amplitude")
        pattern = req.get("pattern")
        if pattern is not None and not isinstance(pattern, str):
            raise ValueError(f"pattern: must be one of {list(self.patterns)}, got {pattern!r}")
        try:
            modulation = self.cpg.check_request(frequency=frequency, amplitude_scale=amplitude, pattern=pattern)
        except Refused as exc:
            raise ValueError(exc.reason) from None
        clean = {k: req[k] for k in ("frequency", "amplitude", "pattern") if k in req}

        def apply(loop):
            return self.cpg.apply(modulation)
        return apply, clean

    def __repr__(self):
        return (f"JawCPGTrajectory(pattern={self.cpg.pattern.name!r}, frequency={self.cpg.target_frequency:g} Hz, "
                f"amplitude={list(self.cpg.amplitude_scale)})")


class LegTrackingFeedback:
    """Loop hook: feeds the norm of the leg tracking error ``|q_d - q|`` (m) of the cycle just run into the
    trajectory's CPG phase (read by the next sample). Allocation-free: one preallocated difference."""

    def __init__(self, trajectory: JawCPGTrajectory, desired: np.ndarray):
        self.trajectory = trajectory
        self.desired = desired
        self._error = np.zeros_like(desired)

    def __call__(self, cycle, t, state, command) -> None:
        np.subtract(self.desired, state.q, out=self._error)
        self.trajectory.cpg.set_feedback(math.sqrt(float(np.dot(self._error, self._error))))


class BiteForceFeedback:
    """Loop hook: feeds the bite force (N) the bite monitor estimated this cycle into the trajectory's CPG
    phase (read by the next sample); runs after the monitor (hooks run in order)."""

    def __init__(self, trajectory: JawCPGTrajectory, monitor):
        self.trajectory = trajectory
        self.monitor = monitor

    def __call__(self, cycle, t, state, command) -> None:
        self.trajectory.cpg.set_feedback(self.monitor.bite_force)
