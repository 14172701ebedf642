"""Collision detection and reaction on the momentum observer (:mod:`rtctl.loops.observer`).

Haddadin, De Luca & Albu-Schaeffer, IEEE T-RO 2017, sec. IV (detection) and sec. VII (reaction).
A collision is detected on joint k when the residual leaves its band,

    |r_k| > threshold_k + velocity_band_k |qd_k| + acceleration_band_k |qdd_d,k|,

the static part covering sensor noise and unmodelled friction at rest, the bands growing with what
the model gets wrong in motion (viscous friction ~ |qd|, an inertia error dM ~ |qdd|; the desired
acceleration stands in for the measured one, which the observer does without). Reactions, latched
through the safety monitor's e-stop path (so ``rearm`` leaves them like any other trip):

* ``"stop"``: the safety monitor's safe command (damping or zero torque), from this very cycle;
* ``"reflex"``: compliant reflex, gravity compensation plus damping ``tau = g(q) - D qd``, the
  robot floats away from the contact (sec. VII-B, "torque reflex" with zero gain);
* ``"retract"``: the reflex plus, for ``retract_time`` seconds, the residual at detection
  ``+ retract_gain r_det``: the joints are pushed the way the contact pushed them (away from it).

Every reaction effort is clamped to the joints' effort limits. The monitor is one of the loop's
``hooks``: it runs after the controller and before the safety check, allocation-free unless it
detects. Its telemetry values (residual per joint, the estimated wrench at the observer's frame,
the detection flag) are in :attr:`CollisionMonitor.telemetry_values`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from rtctl.dynamics import Dynamics
from rtctl.options import setting
from rtctl.rt.hooks import LoopHook

from .observer import MomentumObserver

REACTIONS = ("stop", "reflex", "retract")


@njit(cache=True)
def detect(r, v, v_index, qdd_d, static, band_v, band_a, threshold):
    """Write each actuated joint's threshold; return the first joint whose |r| exceeds it, else -1."""
    hit = -1
    for k in range(r.shape[0]):
        threshold[k] = static[k] + band_v[k] * abs(v[v_index[k]]) + band_a[k] * abs(qdd_d[k])
        if hit < 0 and abs(r[k]) > threshold[k]:
            hit = k
    return hit


@njit(cache=True)
def reflex_effort(g, v, v_index, damping, push, limit, effort):
    """``effort = g - D v + push`` on the actuated joints, clamped to +-limit, zero elsewhere."""
    effort[:] = 0.0
    for k in range(v_index.shape[0]):
        i = v_index[k]
        e = g[i] - damping[k] * v[i] + push[k]
        effort[i] = min(max(e, -limit[k]), limit[k])


class CollisionMonitor(LoopHook):
    """Observer + detection + reaction, as a loop hook (module docstring)."""

    @dataclass(frozen=True)
    class Options:
        """The ``[collision]`` section (SI units; per-joint values: a scalar or one per actuated joint)."""

        enabled: bool = setting("bool", False)
        gain: object = setting("floats", 50.0, positive=True)            # K_O (1/s): time constant 1/K_O
        threshold: object = setting("floats", 1.0, positive=True)        # N m (N): static part
        velocity_band: object = setting("floats", 0.0, low=0.0)          # N m s/rad: grows with |qd|
        acceleration_band: object = setting("floats", 0.0, low=0.0)      # N m s^2/rad: grows with |qdd_d|
        reaction: str = setting("str", "stop", choices=REACTIONS)
        reflex_damping: object = setting("floats", None, low=0.0)        # N m s/rad; default: [safety] damping
        retract_gain: float = setting("float", 1.0, low=0.0)             # times the residual at detection
        retract_time: float = setting("float", 0.2, low=0.0)             # s
        frame: str = setting("str", "")                                   # wrench estimate; "": the last link

    @classmethod
    def from_config(cls, options: dict, loop, dyn: Dynamics) -> CollisionMonitor:
        """Built from a validated ``[collision]`` table for ``loop`` (over the controller's model) and
        attached to it; None when not ``enabled``."""
        if not options.get("enabled"):
            return None
        kwargs = {k: v for k, v in options.items() if k != "enabled" and v is not None}
        return cls(dyn, loop.safety, loop.period, **kwargs).attach(loop)

    def __init__(self, dyn: Dynamics, safety, dt: float, *, gain=50.0, threshold=1.0, velocity_band=0.0,
                 acceleration_band=0.0, reaction: str = "stop", reflex_damping=None, retract_gain: float = 1.0,
                 retract_time: float = 0.2, frame: str = ""):
        if reaction not in REACTIONS:
            raise ValueError(f"collision: reaction must be one of {REACTIONS}, got {reaction!r}")
        self.observer = MomentumObserver(dyn, gain, dt, frame=frame or "")
        self.dyn, self.safety, self.reaction, self.dt = dyn, safety, reaction, float(dt)
        obs = self.observer
        self.joint_names, self.v_index = obs.joint_names, np.ascontiguousarray(obs.v_index, dtype=np.int64)
        n = len(self.joint_names)
        self.threshold = self._per_joint("threshold", threshold, n)
        self.velocity_band = self._per_joint("velocity_band", velocity_band, n)
        self.acceleration_band = self._per_joint("acceleration_band", acceleration_band, n)
        damping = safety.damping_gain if reflex_damping is None else reflex_damping
        self.reflex_damping = self._per_joint("reflex_damping", damping, n)
        self.retract_gain, self.retract_time = float(retract_gain), float(retract_time)
        self.effort_limit = np.ascontiguousarray(dyn.model.effort_limit[self.v_index], dtype=float)
        self.band = np.zeros(n)           # this cycle's threshold per joint
        self._qdd_d = np.zeros(n)         # the desired acceleration (the loop's, once attached)
        self._g, self._push, self._r_det = np.zeros(dyn.model.nv), np.zeros(n), np.zeros(n)
        self.detections, self.detection_cycle, self.detection_time, self.detection = 0, -1, np.nan, {}
        self._reflex_cycles = 0
        self.telemetry_fields = ([f"residual/{j}" for j in self.joint_names]
                                 + [f"wrench/{c}" for c in ("nx", "ny", "nz", "fx", "fy", "fz")] + ["collision"])
        self.telemetry_values = np.zeros(len(self.telemetry_fields))

    @staticmethod
    def _per_joint(name, value, n) -> np.ndarray:
        arr = np.asarray(value, dtype=float)
        if arr.ndim == 0:
            arr = np.full(n, float(arr))
        if arr.shape != (n,) or not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise ValueError(f"collision: {name} must be a scalar or {n} finite values >= 0, got {value!r}")
        return arr

    def attach(self, loop) -> CollisionMonitor:
        """Run in ``loop`` (one of its ``hooks``), on its desired acceleration; telemetry publishes the
        monitor's ``telemetry_values`` after the controller's own (``extra``)."""
        self._qdd_d = loop.qdd_d
        loop.hooks.append(self)
        loop.collision = self
        return self

    def on_start(self) -> None:
        """At the start of each run (the loop calls it after bringing the hardware up): the torque measured
        before it does not continue the last run's, so the observer restarts (r = 0, p(0) = p now)."""
        self.observer.reset()

    def warm(self, cycle) -> None:
        """The observer, the detection and the reflex's gravity and effort kernels, on copies: a collision
        must not wait for a compiler (:mod:`rtctl.rt.warmup`)."""
        state, n = cycle.state, self.band.shape[0]
        self.observer.warm(state.q, state.v, state.effort)
        detect(np.zeros(n), state.v, self.v_index, cycle.qdd_d, self.threshold, self.velocity_band,
               self.acceleration_band, np.zeros(n))
        g = self.dyn.gravity_forces(state.q, out=np.zeros(self.dyn.model.nv))
        reflex_effort(g, state.v, self.v_index, self.reflex_damping, np.zeros(n), self.effort_limit,
                      cycle.command.effort)

    def __call__(self, cycle: int, t: float, state, command) -> None:
        """One cycle: update the observer on the measured state and the torque applied over the last period,
        then detect (only while the safety monitor is armed)."""
        obs = self.observer
        if not obs.update(state.q, state.v, state.effort):
            return  # a non-finite state: the safety check trips on it
        n = self.band.shape[0]
        values = self.telemetry_values
        values[:n] = obs.joint_residual
        values[n:n + 6] = obs.wrench
        if self.safety.tripped:
            return
        values[n + 6] = 0.0
        hit = detect(obs.joint_residual, state.v, self.v_index, self._qdd_d, self.threshold, self.velocity_band,
                     self.acceleration_band, self.band)
        if hit >= 0:
            self._react(hit, cycle, t)

    def _react(self, k: int, cycle: int, t: float) -> None:
        """The slow path: record the detection and trip the safety monitor with this reaction."""
        obs = self.observer
        r, band = float(obs.joint_residual[k]), float(self.band[k])
        self.detections += 1
        self.detection_cycle, self.detection_time = cycle, t
        self.telemetry_values[self.band.shape[0] + 6] = 1.0
        self.detection = {"joint": self.joint_names[k], "residual": r, "threshold": band, "cycle": cycle, "t": t,
                          "residuals": obs.joint_residual.copy(), "wrench": obs.wrench.copy(), "frame": obs.frame}
        self._r_det[:] = obs.joint_residual
        self._reflex_cycles = 0
        f = obs.wrench[3:]
        reason = (f"collision on joint '{self.joint_names[k]}': |r| = {abs(r):.3g} > {band:.3g} (N m or N); "
                  f"force at '{obs.frame}' ~ [{f[0]:.3g}, {f[1]:.3g}, {f[2]:.3g}] N; reaction {self.reaction}")
        self.safety.estop(reason, reaction=None if self.reaction == "stop" else self._reflex)

    def _reflex(self, state, command) -> None:
        """The compliant reflex (module docstring), run by the safety check while the trip is latched."""
        self.dyn.gravity_forces(state.q, out=self._g)
        self._push[:] = 0.0
        if self.reaction == "retract" and self._reflex_cycles * self.dt < self.retract_time:
            np.multiply(self._r_det, self.retract_gain, out=self._push)
        self._reflex_cycles += 1
        reflex_effort(self._g, state.v, self.v_index, self.reflex_damping, self._push, self.effort_limit,
                      command.effort)
