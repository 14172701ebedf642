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

With a force-torque sensor (``wrench_sensor``, :mod:`rtctl.loops.collision_sensor`) the monitor also measures
the external joint torque of a contact beyond the sensor, ``tau_m = J_s^T w`` (its reading less bias and the
weight it carries), detects on it with the same thresholds (no observer lag: a contact shows in the cycle it
starts), and holds it against the observer's residual through the observer's lag
(:mod:`rtctl.loops.agreement`): beyond ``disagreement_tolerance`` on a joint for longer than
``disagreement_time`` the sensor or the model is wrong, and the monitor latches the safety monitor's stop with
one line saying which is plausible. Telemetry adds ``measured_torque/*``, ``torque_disagreement/*`` (the lagged
measurement less the residual) and the flag ``sensor_disagrees``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from rtctl.dynamics import Dynamics
from rtctl.options import setting
from rtctl.rt.hooks import LoopHook

from .collision_sensor import SensorComparison
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
        wrench_sensor: str = setting("str", None)    # a force_torque [[sensors]] name: detect on its wrench too
        tool_mass: float = setting("float", None, low=0.0)   # kg the sensor carries that the model lacks (0)
        tool_com: object = setting("floats", None)           # m, its centre of mass in the sensor's frame (0)
        tare_on_start: bool = setting("bool", None)          # tared at each run's second cycle (false)
        disagreement_tolerance: object = setting("floats", None, positive=True)  # N m (N); default: threshold
        disagreement_time: float = setting("float", None, positive=True)        # s beyond it: a fault (0.1)

    @classmethod
    def from_config(cls, options: dict, loop, dyn: Dynamics) -> CollisionMonitor:
        """Built from a validated ``[collision]`` table for ``loop`` (over the controller's model) and
        attached to it; None when not ``enabled``."""
        if not options.get("enabled"):
            return None
        kwargs = {k: v for k, v in options.items() if k != "enabled" and v is not None}
        name = kwargs.pop("wrench_sensor", None)
        if name is not None:
            sensors = {s.options.name: s for s in loop.sensors}
            if name not in sensors:
                raise ValueError(f"wrench_sensor: the robot has no sensor {name!r} (its sensors: {sorted(sensors)})")
            kwargs["sensor"] = sensors[name]
        return cls(dyn, loop.safety, loop.period, **kwargs).attach(loop)

    def __init__(self, dyn: Dynamics, safety, dt: float, *, gain=50.0, threshold=1.0, velocity_band=0.0,
                 acceleration_band=0.0, reaction: str = "stop", reflex_damping=None, retract_gain: float = 1.0,
                 retract_time: float = 0.2, frame: str = "", sensor=None, tool_mass=None, tool_com=None,
                 tare_on_start=None, disagreement_tolerance=None, disagreement_time=None):
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
        self.disagreements = 0            # faults latched for a sensor that disagrees with the observer
        self._reflex_cycles = 0
        self.telemetry_fields = ([f"residual/{j}" for j in self.joint_names]
                                 + [f"wrench/{c}" for c in ("nx", "ny", "nz", "fx", "fy", "fz")] + ["collision"])
        self.effort_units = [units[2] for units in safety.units]
        self.telemetry_units = [*self.effort_units, *["N m"] * 3, *["N"] * 3, "1"]
        self.comparison = self._comparison(sensor, tool_mass, tool_com, tare_on_start, disagreement_tolerance,
                                           disagreement_time)
        self.telemetry_values = np.zeros(len(self.telemetry_fields))

    def _comparison(self, sensor, tool_mass, tool_com, tare_on_start, tolerance, duration):
        """The sensor's measurement beside the observer's (module docstring), or None without a sensor."""
        given = {"tool_mass": tool_mass, "tool_com": tool_com, "tare_on_start": tare_on_start,
                 "disagreement_tolerance": tolerance, "disagreement_time": duration}
        if sensor is None:
            unused = [k for k, v in given.items() if v is not None]
            if unused:
                raise ValueError(f"{unused[0]}: applies to a force-torque sensor's wrench; name one with wrench_sensor")
            return None
        if sensor.kind != "force_torque":
            raise ValueError(f"wrench_sensor: sensor {sensor.options.name!r} is of kind {sensor.kind!r}, not "
                             "'force_torque'")
        n = self.band.shape[0]
        com = np.zeros(3) if tool_com is None else np.asarray(tool_com, dtype=float).reshape(-1)
        if com.shape != (3,) or not np.all(np.isfinite(com)):
            raise ValueError(f"tool_com must be 3 finite values (m, in the sensor's frame), got {tool_com!r}")
        tolerance = self.threshold if tolerance is None else self._per_joint("disagreement_tolerance", tolerance, n)
        if not np.all(tolerance > 0):
            raise ValueError(f"disagreement_tolerance must be > 0 (N m or N), got {tolerance.tolist()}")
        duration = 0.1 if duration is None else float(duration)
        if not (np.isfinite(duration) and duration > 0):
            raise ValueError(f"disagreement_time must be a finite time > 0 s, got {duration!r}")
        comparison = SensorComparison(self.observer, sensor, tolerance=tolerance, duration=duration,
                                      tool_mass=0.0 if tool_mass is None else float(tool_mass), tool_com=com,
                                      tare_on_start=bool(tare_on_start))
        self.telemetry_fields += ([f"measured_torque/{j}" for j in self.joint_names]
                                  + [f"torque_disagreement/{j}" for j in self.joint_names] + ["sensor_disagrees"])
        self.telemetry_units += [*self.effort_units, *self.effort_units, "1"]
        self._measured_band = np.zeros(n)
        return comparison

    @staticmethod
    def _per_joint(name, value, n) -> np.ndarray:
        arr = np.asarray(value, dtype=float)
        if arr.ndim == 0:
            arr = np.full(n, float(arr))
        if arr.shape != (n,) or not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise ValueError(f"{name} must be a scalar or {n} finite values >= 0 (one per actuated joint), got "
                             f"{value!r}")
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
        before it does not continue the last run's, so the observer restarts (r = 0, p(0) = p now), and the
        sensor's comparison with it (tared first if ``tare_on_start``)."""
        self.observer.reset()
        if self.comparison is not None:
            self.comparison.reset()

    def warm(self, cycle) -> None:
        """The observer, the detection and the reflex's gravity and effort kernels, on copies: a collision
        must not wait for a compiler (:mod:`rtctl.rt.warmup`); with a sensor its processing and comparison."""
        state, n = cycle.state, self.band.shape[0]
        self.observer.warm(state.q, state.v, state.effort)
        detect(np.zeros(n), state.v, self.v_index, cycle.qdd_d, self.threshold, self.velocity_band,
               self.acceleration_band, np.zeros(n))
        g = self.dyn.gravity_forces(state.q, out=np.zeros(self.dyn.model.nv))
        reflex_effort(g, state.v, self.v_index, self.reflex_damping, np.zeros(n), self.effort_limit,
                      cycle.command.effort)
        if self.comparison is not None:
            self.comparison.warm(state.q)

    def __call__(self, cycle: int, t: float, state, command) -> None:
        """One cycle: update the observer on the measured state and the torque applied over the last period
        (and the sensor's measurement beside it), then detect (only while the safety monitor is armed): on the
        observer, on the sensor, then the two's disagreement."""
        obs = self.observer
        if not obs.update(state.q, state.v, state.effort):
            return  # a non-finite state: the safety check trips on it
        n = self.band.shape[0]
        values = self.telemetry_values
        values[:n] = obs.joint_residual
        values[n:n + 6] = obs.wrench
        comparison, split = self.comparison, -1
        if comparison is not None:
            split = comparison.update(state.q)
            values[n + 7:2 * n + 7] = comparison.joint_torque
            values[2 * n + 7:3 * n + 7] = comparison.agreement.difference
        if self.safety.tripped:
            return
        values[n + 6] = 0.0
        hit = detect(obs.joint_residual, state.v, self.v_index, self._qdd_d, self.threshold, self.velocity_band,
                     self.acceleration_band, self.band)
        if hit >= 0:
            self._react(hit, cycle, t, obs.joint_residual, self.band, "r")
            return
        if comparison is None or not comparison.comparing:
            return
        values[3 * n + 7] = 0.0
        hit = detect(comparison.joint_torque, state.v, self.v_index, self._qdd_d, self.threshold,
                     self.velocity_band, self.acceleration_band, self._measured_band)
        if hit >= 0:
            self._react(hit, cycle, t, comparison.joint_torque, self._measured_band, "tau_m")
        elif split >= 0:
            self._disagree(split, cycle, t)

    def _react(self, k: int, cycle: int, t: float, torque, band, symbol: str) -> None:
        """The slow path: record the detection (on the observer's residual ``r`` or the sensor's ``tau_m``) and
        trip the safety monitor with this reaction."""
        obs, measured = self.observer, symbol != "r"
        r, limit = float(torque[k]), float(band[k])
        self.detections += 1
        self.detection_cycle, self.detection_time = cycle, t
        self.telemetry_values[self.band.shape[0] + 6] = 1.0
        if measured:
            wrench, frame = self.comparison.processing.moved.copy(), self.comparison.sensor.options.frame
        else:
            wrench, frame = obs.wrench.copy(), obs.frame
        self.detection = {"joint": self.joint_names[k], "residual": r, "threshold": limit, "cycle": cycle, "t": t,
                          "residuals": np.array(torque), "wrench": wrench, "frame": frame,
                          "source": f"sensor '{self.comparison.name}'" if measured else "observer"}
        self._r_det[:] = torque
        self._reflex_cycles = 0
        f = wrench[3:]
        by = f" (measured by sensor '{self.comparison.name}')" if measured else ""
        reason = (f"collision on joint '{self.joint_names[k]}'{by}: |{symbol}| = {abs(r):.3g} > {limit:.3g} "
                  f"{self.effort_units[k]}; force at '{frame}' ~ [{f[0]:.3g}, {f[1]:.3g}, {f[2]:.3g}] N; "
                  f"reaction {self.reaction}")
        self.safety.estop(reason, reaction=None if self.reaction == "stop" else self._reflex)

    def _disagree(self, k: int, cycle: int, t: float) -> None:
        """The slow path: the sensor and the observer have disagreed on joint k for longer than the tolerated
        time; latch the safe state (the configured stop, not a reflex: this is a fault, not a contact)."""
        comparison = self.comparison
        agreement, n = comparison.agreement, self.band.shape[0]
        self.disagreements += 1
        self.telemetry_values[3 * n + 7] = 1.0
        unit = self.effort_units[k]
        self.safety.estop(
            f"collision monitor: sensor '{comparison.name}' and the observer disagree on joint "
            f"'{self.joint_names[k]}' for more than {agreement.duration:g} s: measured {agreement.lagged[k]:.3g} "
            f"{unit} (through the observer's lag), observed {self.observer.joint_residual[k]:.3g} {unit}, "
            f"tolerance {agreement.tolerance[k]:.3g} {unit}; "
            f"{agreement.plausible_cause(self.observer.joint_residual, comparison.silent())}")

    def _reflex(self, state, command) -> None:
        """The compliant reflex (module docstring), run by the safety check while the trip is latched."""
        self.dyn.gravity_forces(state.q, out=self._g)
        self._push[:] = 0.0
        if self.reaction == "retract" and self._reflex_cycles * self.dt < self.retract_time:
            np.multiply(self._r_det, self.retract_gain, out=self._push)
        self._reflex_cycles += 1
        reflex_effort(self._g, state.v, self.v_index, self.reflex_damping, self._push, self.effort_limit,
                      command.effort)
