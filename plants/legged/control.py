"""Legged locomotion of Shah, Saha & Dutt (2012): contact-aware control and the walking harness.

The planned motion (gait synthesis of Appendix B, leg inverse kinematics of
Fig. 11, the ``"biped_walk"`` and ``"quadruped_trot"`` trajectories) lives in
:mod:`rtctl.plants.legged.gait`; its public names are re-exported here.

Control (section 4.3) with the foot-ground wrenches
----------------------------------------------------
The model-based term of the paper's control laws includes the foot-ground
forces ``tau^F`` (eqs. 25-26). :class:`LeggedFeedForwardPD`
(``"legged_ff_pd"``, eq. 31) and :class:`LeggedComputedTorque`
(``"legged_computed_torque"``, eqs. 33-37) first evaluate the compliant
ground (:func:`rtctl.dynamics.contact.contact_wrenches`, the plant's contact
model) at the *measured* state into the external-wrench columns of the
dynamics workspace, then run the compiled control step of
:mod:`loops.controllers` (:func:`~loops.controllers._control_step`), whose
recursive inverse dynamics (:func:`~rtctl.dynamics.kernels.floating_base_rnea`,
eqs. 26-27, no inverse of the full GIM) includes them: one allocation-free
compiled call per cycle. Gains as in the paper: ``kp = 49``, ``kd = 14``
(N m/rad and N m s/rad for the torque-level feed-forward law; 1/s^2 and 1/s
for computed torque). With ``kp = kd = 0`` the feed-forward law is the
paper's "without control" run: the inverse-dynamics torques alone.

Measured ground forces. With ``ground_force = "sensors"`` both laws take
``w^F`` from force-torque sensors on the feet (``foot_sensors``, one per foot
body; :mod:`rtctl.plants.legged.foot_sensors`) instead of the contact model
(eqs. 17 and 20 of the paper, the spring-dashpot ground at the measured state):
each reading, turned to the wrench on its body about the body's origin, goes
into the same recursive inverse dynamics (eqs. 26-27). This is what a robot
on an estimated base needs: the model's force on the 1e6 N/m ground changes by
100 N for 0.1 mm of base height, the sensors' not at all. On the truth and
noise-free sensors the two agree to rounding: the plant's last step leaves
the contact model evaluated at the state the controller then measures.

Ground. The paper gives no ground parameters. Its plan (B.1 without the
legs' mass) walks the full 12 s only on a stiff, well-damped ground, and
that ground, :data:`~rtctl.plants.legged.plant.PAPER_GROUND` (k = 1e6 N/m,
d = 5000 N s/m per contact point), is the legged plant's default (a
``[contact]`` section without ``stiffness``/``damping``, or none) and these
controllers' (the measured reason is in :mod:`rtctl.plants.legged.gait`,
"Legs' mass"). Both robots' configs run on it; :data:`BIPED_GROUND` is the
same model under its former name.

Sampling rate. The paper's laws act in continuous time (its variable-step
solver evaluates them at every step; :func:`run_walk_offline` does the same
with BDF). Under a zero-order hold two things need a short period: the
feed-forward law's ``kd = 14 N m s/rad`` on a swinging foot of about
1.8e-3 kg m^2 about the ankle is stable only for ``kd T / I < 2``
(``T < 0.26 ms``), and both laws cancel the ground wrench of the measured
state, which must be the one the plant applies. On the stiff ground the
plant must therefore step once per control cycle: with the controller at
10 kHz, 1 plant sub-step walks 12 s under both laws and agrees with 20 kHz
and with the continuous-time BDF run within 5 mm in x and 0.03 mrad in
pitch, while 2 sub-steps diverge within 0.03 s (FF and CT) and 3-4
sub-steps topple CT within 2 s: within a cycle the 1e6 N/m contact force
changes while the controller's cancellation of it is held. Legged runs use
10 kHz with 1 plant sub-step (0.1 ms). Measured cost (12 s walk, load
average 1.5 on 2 cores): trajectory sample + FF update + plant step 11 us per
0.1 ms cycle.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit
from numba.core.errors import TypingError

from rtctl.dynamics import Dynamics
from rtctl.dynamics.contact import ContactModel, contact_wrenches
from rtctl.dynamics.kernels import W_FEXT, all_finite, model_sizes
from rtctl.options import setting
from rtctl.plants.legged.gait import BipedGait, BipedWalk, QuadrupedGait, QuadrupedTrot, ipm_initial_state
from rtctl.plants.legged.model import LEGGED_ROBOTS, LeggedRobot
from rtctl.plants.legged.foot_sensors import measured_ground_wrenches
from rtctl.plants.legged.plant import PAPER_GROUND

from rtctl.loops.controllers import (
    _NOT_FINITE,
    _OK,
    _WRONG_LENGTH,
    MODE_FF_PD,
    MODE_FLOATING_CT,
    _CompiledController,
    _control_step,
)

__all__ = ["BIPED_GROUND", "BipedGait", "BipedWalk", "LeggedComputedTorque", "LeggedFeedForwardPD", "QuadrupedGait",
           "QuadrupedTrot", "TROT_PAIRS", "WalkRecord", "ipm_initial_state", "make_walk", "planned_zmp_offset",
           "run_walk", "run_walk_offline", "support_line_offsets"]

BIPED_GROUND = PAPER_GROUND
"""The legged plant's default ground, that of Shah, Saha & Dutt (2012) (module docstring, "Ground"):
k = 1e6 N/m, d = 5000 N s/m."""


# -- contact-aware controllers ----------------------------------------------------------------------------
_SENSOR_NOT_FINITE = 1000   # + k: foot sensor k's reading is not finite
GROUND_FORCE = ("model", "sensors")


@njit(cache=True, inline="always")
def _check_state(mi, q, v):
    """``_OK`` or the status of :func:`~loops.controllers._control_step` for a measured state of the wrong
    length or not finite."""
    nq, nv = model_sizes(mi)
    if q.shape[0] != nq:
        return _WRONG_LENGTH + 1
    if v.shape[0] != nv:
        return _WRONG_LENGTH + 2
    if not all_finite(q):
        return _NOT_FINITE + 1
    if not all_finite(v):
        return _NOT_FINITE + 2
    return _OK


@njit(cache=True)
def _legged_step(mode, mi, mf, ws, index, kp, kd, work, base_block, contact, q, v, q_d, qd_d, qdd_d, effort):
    """Ground wrenches at the measured (q, v) into ``ws``, then the control law ``mode`` (one compiled call).

    ``contact = (params, bodies, points, grf)``: the contact model and points of
    :func:`~rtctl.dynamics.contact.contact_wrenches`; ``grf`` receives the
    per-point ground reaction forces. Returns the status code of
    :func:`~loops.controllers._control_step`.
    """
    status = _check_state(mi, q, v)
    if status != _OK:
        return status
    params, bodies, points, grf = contact
    nb = mi.shape[0]
    for i in range(nb):
        for j in range(6):
            ws[i, W_FEXT + j] = 0.0
    contact_wrenches(mi, mf, ws, q, v, params, bodies, points, ws[:nb, W_FEXT:W_FEXT + 6], grf)
    return _control_step(mode, mi, mf, ws, index, kp, kd, work, base_block, q, v, q_d, qd_d, qdd_d, effort)


@njit(cache=True)
def _measured_step(mode, mi, mf, ws, index, kp, kd, work, base_block, feet, q, v, q_d, qd_d, qdd_d, effort):
    """:func:`_legged_step` with the ground wrenches of K foot sensors, ``feet = (bodies, mounts, wrenches,
    forces)``: their readings on their bodies at the measured configuration
    (:func:`~rtctl.plants.legged.foot_sensors.measured_ground_wrenches`; ``forces`` receives each one's world
    force). ``_SENSOR_NOT_FINITE + k`` when reading ``k`` is not finite."""
    status = _check_state(mi, q, v)
    if status != _OK:
        return status
    bodies, mounts, wrenches, forces = feet
    for k in range(wrenches.shape[0]):
        if not all_finite(wrenches[k]):
            return _SENSOR_NOT_FINITE + k
    nb = mi.shape[0]
    for i in range(nb):
        for j in range(6):
            ws[i, W_FEXT + j] = 0.0
    measured_ground_wrenches(mi, mf, ws, q, bodies, mounts, wrenches, ws[:nb, W_FEXT:W_FEXT + 6], forces)
    return _control_step(mode, mi, mf, ws, index, kp, kd, work, base_block, q, v, q_d, qd_d, qdd_d, effort)


class _LeggedController(_CompiledController):
    """Contact-aware control step; ``robot`` defaults to the built-in robot named like the model.

    ``ground_force`` says where the foot-ground wrenches ``w^F`` of eq. 26 come from: ``"model"`` (the
    default) evaluates the plant's compliant ground at the measured state, as the paper does; ``"sensors"``
    takes them from the force-torque sensors ``foot_sensors`` (one per foot body; what a real robot measures:
    :mod:`rtctl.plants.legged.foot_sensors`), which a state estimator's base cannot spoil: on the 1e6 N/m
    ground 0.1 mm of estimated height is 100 N of modelled force, but the measured force does not depend on
    where the base is thought to be, only the lever arms and axes do (the sensor's pose relative to its body).
    """

    requires_model = ("planar_biped", "spatial_quadruped")

    @dataclass(frozen=True)
    class Options(_CompiledController.Options):
        ground_force: str = setting("str", "model", choices=GROUND_FORCE)   # w^F from the ground model or sensors
        foot_sensors: object = setting("strs", None)   # "sensors": the force_torque [[sensors]], one per foot body

    @classmethod
    def from_config(cls, options: dict, context):
        """Over the plant's own ground model (tau^F of eq. 26): needs plant type 'legged'."""
        contact = context.plant.contact_model
        if contact is None:
            raise ValueError(f"type '{cls.name}' needs plant type 'legged'")
        return cls(context.dynamics, cls.Options(**options), contact=contact)

    def __init__(self, dyn: Dynamics, options: "_LeggedController.Options | None" = None, *,
                 robot: LeggedRobot | None = None, contact: ContactModel | None = None):
        super().__init__(dyn, options)
        m = self.model
        if robot is None:
            if m.name not in LEGGED_ROBOTS:
                raise ValueError(f"{self.name}: model '{m.name}' is not a built-in legged robot "
                                 f"({sorted(LEGGED_ROBOTS)}); pass robot=LeggedRobot(...)")
            robot = LEGGED_ROBOTS[m.name]()
        if robot.model.nbodies != m.nbodies or robot.model.nv != m.nv or robot.n_base != self.n_base:
            raise ValueError(f"{self.name}: robot '{robot.name}' (nv={robot.model.nv}, n_base={robot.n_base}) does "
                             f"not match model '{m.name}' (nv={m.nv}, n_base={self.n_base})")
        if contact is None:
            contact = PAPER_GROUND
        elif isinstance(contact, dict):
            contact = ContactModel(**contact)
        elif not isinstance(contact, ContactModel):
            raise ValueError(f"{self.name}: contact must be a ContactModel or a dict of its fields, got "
                             f"{type(contact).__name__}")
        self.robot, self.contact = robot, contact
        self.grf = np.zeros((len(robot.contact_bodies), 3))  # ground reaction per contact point, last cycle
        self._contact = (contact.pack(), np.ascontiguousarray(robot.contact_bodies, dtype=np.int64),
                         np.ascontiguousarray(robot.contact_points, dtype=np.float64), self.grf)
        o = self.options
        if o.ground_force == "model" and o.foot_sensors is not None:
            raise ValueError(f"{self.name}: foot_sensors is read with ground_force = 'sensors' only")
        if o.ground_force == "sensors" and not o.foot_sensors:
            raise ValueError(f"{self.name}: ground_force = 'sensors' needs foot_sensors, the force_torque "
                             "[[sensors]] on the feet")
        self.foot_sensors, self._readings = [], []
        self.measured_forces = np.zeros((0, 3))   # "sensors": each foot sensor's force, world axes (N), last cycle
        self._kernel, self._ground = _legged_step, self._contact   # the compiled step and its ground argument

    def close_on_feet(self, sensors) -> None:
        """Take the ground wrenches from ``sensors`` (force-torque :class:`~rtctl.drivers.sensor.Sensor`, one on
        each body of the robot that has contact points) from the next update on. ValueError, one line naming
        the sensor or the foot, for another kind, a body without contact points or a foot without a sensor."""
        from rtctl.drivers.sensor import FORCE_TORQUE
        from rtctl.drivers.sim_force_torque import sensor_mount

        m, feet = self.model, set(int(b) for b in self.robot.contact_bodies)
        bodies = []
        for s in sensors:
            if s.kind != FORCE_TORQUE:
                raise ValueError(f"foot_sensors: sensor {s.options.name!r} is a {s.kind!r} sensor, not "
                                 f"{FORCE_TORQUE!r}")
            if s.body not in feet:
                where = m.body_names[s.body] if s.body >= 0 else "the world"
                raise ValueError(f"foot_sensors: sensor {s.options.name!r} is on {where!r}, which has no contact "
                                 f"point (feet: {sorted(m.body_names[b] for b in feet)})")
            bodies.append(s.body)
        missing = sorted(m.body_names[b] for b in feet - set(bodies))
        if missing:
            raise ValueError(f"foot_sensors: no sensor on foot {missing[0]!r}: its ground force would be missing")
        n = len(bodies)
        self.foot_sensors = list(sensors)
        self.measured_forces = np.zeros((n, 3))
        wrenches = np.zeros((n, 6))
        self._readings = [(wrenches[k], s.reading.wrench) for k, s in enumerate(sensors)]
        self._kernel = _measured_step
        self._ground = (np.array(bodies, dtype=np.int64), np.array([sensor_mount(s) for s in sensors]), wrenches,
                        self.measured_forces)

    def add_loop_hooks(self, loop) -> None:
        """With ``ground_force = "sensors"``: close on the loop's sensors ``foot_sensors`` names."""
        names = self.options.foot_sensors
        if self.options.ground_force != "sensors":
            return
        sensors = {s.options.name: s for s in loop.sensors}
        unknown = [n for n in names if n not in sensors]
        if unknown:
            raise ValueError(f"foot_sensors: the robot has no sensor {unknown[0]!r} (its sensors: "
                             f"{sorted(sensors)})")
        self.close_on_feet([sensors[n] for n in names])

    def warm(self, cycle) -> None:
        """:meth:`Controller.warm`, on zero foot wrenches: before the hardware is activated the sensors have no
        sample (NaN), which :meth:`update` refuses in a run."""
        saved = self._readings
        self._readings = [(row, np.zeros(6)) for row, _ in saved]
        try:
            super().warm(cycle)
        finally:
            self._readings = saved

    def error_inertia(self, q) -> None:
        """None: the ground's wrenches take part in the error dynamics; no stability bound on the gains."""
        return None

    def update(self, t, dt, q, v, q_d, qd_d, qdd_d, effort) -> None:
        """Efforts (nv) for the measured state and the desired joint motion, with the ground wrenches of the
        measured state (or the foot sensors' readings) in the model-based term; allocation-free."""
        if self.foot_sensors:
            for row, reading in self._readings:
                np.copyto(row, reading)
        elif self.options.ground_force == "sensors":
            raise ValueError(f"{self.name}: ground_force = 'sensors' but no foot sensors bound (close_on_feet)")
        try:
            status = self._kernel(self.mode, self.dyn.mi, self.dyn.mf, self.dyn.ws, self.index, self.kp, self.kd,
                                  self._work, self._base_block, self._ground, q, v, q_d, qd_d, qdd_d, effort)
        except (TypeError, TypingError):  # inputs numba rejects: lists, other dtypes, strided views
            status = self._update_converted(q, v, q_d, qd_d, qdd_d, effort)
        if status != _OK:
            self._raise(status)
        if self.friction_compensation:
            self._compensate_friction(qd_d, effort)

    def _update_converted(self, q, v, q_d, qd_d, qdd_d, effort):
        args, kp, kd = self._converted_inputs(q, v, q_d, qd_d, qdd_d, effort)
        return self._kernel(self.mode, self.dyn.mi, self.dyn.mf, self.dyn.ws, self.index, kp, kd, self._work,
                            self._base_block, self._ground, *args, effort)

    def _raise(self, status):
        if status >= _SENSOR_NOT_FINITE:
            sensor = self.foot_sensors[status - _SENSOR_NOT_FINITE]
            raise ValueError(f"{self.name}: foot sensor {sensor.options.name!r} reads NaN or inf")
        super()._raise(status)


class LeggedFeedForwardPD(_LeggedController):
    """Feed-forward + PD, eq. 31, with the foot-ground wrenches: ``tau = ID(q_d, qd_d, qdd_d; w^F) + Kp e + Kd e_dot``.

    The under-actuated inverse dynamics (eqs. 26-27) at the measured base state
    and the desired joint state, with the ground wrenches ``w^F`` of the
    measured state (:class:`~loops.controllers.FeedForwardPD` plus ``tau^F``).
    Gains in N m/rad and N m s/rad (the paper: 49 and 14). ``kp = kd = 0``:
    the inverse-dynamics torques alone (the paper's run without control).
    """

    mode = MODE_FF_PD


class LeggedComputedTorque(_LeggedController):
    """Under-actuated computed torque, eqs. 33-37, with the foot-ground wrenches of the measured state.

    ``alpha_theta = qdd_d + Kp e + Kd e_dot`` (eq. 37); base acceleration (eq. 34)
    and joint torques (eq. 35) by :func:`~rtctl.dynamics.kernels.floating_base_rnea`
    with ``w^F`` in the workspace, so the joints of the (exact) model
    accelerate at ``alpha_theta`` whatever the contact state. Gains in 1/s^2
    and 1/s (the paper: 49 and 14, a critically damped 7 rad/s error dynamics).
    """

    gain_units = ("1/s^2", "1/s")
    mode = MODE_FLOATING_CT


# -- simulation harness (tests, examples) --------------------------------------------------------------------
class WalkRecord:
    """Samples of a legged run: ``t`` (N,), measured ``q`` (N, nq) and ``v`` (N, nv), desired joint motion
    ``q_d`` (N, n), commanded ``effort`` (N, nv) and ground reactions ``grf`` (N, nc, 3) at the measured
    state; ``gait`` the planner, ``robot``, the plant's ``energy_account`` and ``energy_change``
    (kinetic + potential, J) over the run, and for loop runs the loop ``report`` and ``failures``."""

    def __init__(self, robot, gait, n_samples):
        m = robot.model
        nc, n = len(robot.contact_bodies), m.nv - robot.n_base
        self.robot, self.gait = robot, gait
        self.t = np.zeros(n_samples)
        self.q, self.v = np.zeros((n_samples, m.nq)), np.zeros((n_samples, m.nv))
        self.q_d, self.effort = np.zeros((n_samples, n)), np.zeros((n_samples, m.nv))
        self.grf = np.zeros((n_samples, nc, 3))
        self.count = 0
        self.report = None
        self.energy_account = None
        self.energy_change = None
        self.failures = []

    def trim(self):
        for name in ("t", "q", "v", "q_d", "effort", "grf"):
            setattr(self, name, getattr(self, name)[:self.count])
        return self

    def planned(self):
        """Planned full (q, v) at the sample times."""
        out = [self.gait.state(t) for t in self.t]
        return np.array([o[0] for o in out]), np.array([o[1] for o in out])


def make_walk(robot_name: str, controller: str, *, kp=49.0, kd=14.0, contact=None, rate_hz=10000.0,
              substeps=1, **gait):
    """Plant (started on the gait's state at t = 0), sim driver, trajectory and contact-aware controller
    (``"ff"``: :class:`LeggedFeedForwardPD`, ``"ct"``: :class:`LeggedComputedTorque`) for a built-in robot.
    ``contact``: a :class:`~rtctl.dynamics.contact.ContactModel` or dict; default the plant's,
    :data:`~rtctl.plants.legged.plant.PAPER_GROUND`."""
    from rtctl.drivers import create_driver
    from rtctl.plants import create_plant

    if robot_name not in LEGGED_ROBOTS:
        raise ValueError(f"robot_name must be one of {sorted(LEGGED_ROBOTS)}, got {robot_name!r}")
    kinds = {"ff": LeggedFeedForwardPD, "ct": LeggedComputedTorque}
    if controller not in kinds:
        raise ValueError(f"controller must be 'ff' or 'ct', got {controller!r}")
    robot = LEGGED_ROBOTS[robot_name]()
    walk = BipedWalk if robot_name == "planar_biped" else QuadrupedTrot
    traj = walk(walk.Options(**gait), robot=robot)
    plant = create_plant("legged", LEGGED_ROBOTS[robot_name]().model, substeps=substeps,
                         integrator="semi_implicit_euler", contact=contact)
    plant.reset(*traj.initial_state())
    driver = create_driver("sim", robot.model, plant=plant, period=1.0 / rate_hz)
    cls = kinds[controller]
    ctrl = cls(Dynamics(robot.model), cls.Options(kp=kp, kd=kd), robot=robot, contact=plant.contact_model)
    return robot, traj, plant, driver, ctrl


def run_walk(robot_name: str, controller: str, duration: float, *, record_every: float = 0.01,
             rate_hz: float = 10000.0, **options) -> WalkRecord:
    """Run a legged robot through :class:`rtctl.rt.loop.ControlLoop` (sim driver, ``"legged"`` plant,
    unpaced) for ``duration`` s; samples every ``record_every`` s. Options: see :func:`make_walk`."""
    from rtctl.rt.loop import ControlLoop
    from rtctl.safety import SafetyMonitor

    robot, traj, plant, driver, ctrl = make_walk(robot_name, controller, rate_hz=rate_hz, **options)
    every = max(1, int(round(record_every * rate_hz)))
    rec = WalkRecord(robot, traj.gait, int(duration * rate_hz) // every + 2)
    scratch = np.zeros((2, traj.n))

    def hook(cycle, t, state, command):
        if cycle % every == 0 and rec.count < rec.t.shape[0]:
            k = rec.count
            rec.t[k] = t
            rec.q[k] = state.q
            rec.v[k] = state.v
            traj.sample(t, rec.q_d[k], scratch[0], scratch[1])
            rec.effort[k] = command.effort
            rec.grf[k] = ctrl.grf
            rec.count += 1

    loop = ControlLoop(model=robot.model, drivers=[driver], controller=ctrl, trajectory=traj,
                       safety=SafetyMonitor(robot.model), rate_hz=rate_hz, pace=False, hooks=[hook])
    energy_start = sum(plant.energy())
    rec.report = loop.run(duration=duration)
    rec.failures = list(loop.failures)
    rec.energy_account = plant.energy_account
    if np.all(np.isfinite(plant.q)) and np.all(np.isfinite(plant.v)):
        rec.energy_change = sum(plant.energy()) - energy_start
    return rec.trim()


def run_walk_offline(robot_name: str, controller: str, duration: float, *, record_every: float = 0.01,
                     method: str = "BDF", rtol: float = 1e-6, atol: float = 1e-8, **options) -> WalkRecord:
    """The same closed loop in continuous time, as in the paper: the control law is evaluated at every
    right-hand-side call of the stiff variable-step solver (:meth:`rtctl.plants.legged.plant.LeggedPlant.simulate_offline`,
    ``"BDF"`` or ``"LSODA"``). Returns the state at the sample times (``effort``/``grf`` recomputed there)."""
    robot, traj, plant, _, ctrl = make_walk(robot_name, controller, **options)
    n = traj.n
    q_d, qd_d, qdd_d, eff = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(robot.model.nv)

    def effort(t, q, v):
        traj.sample(t, q_d, qd_d, qdd_d)
        ctrl.update(0.0, 1e-3, np.ascontiguousarray(q), np.ascontiguousarray(v), q_d, qd_d, qdd_d, eff)
        return eff

    times = np.arange(0.0, duration + 0.5 * record_every, record_every)
    times = times[times <= duration]
    t, q, v, info = plant.simulate_offline(duration, effort, method=method, rtol=rtol, atol=atol, t_eval=times)
    rec = WalkRecord(robot, traj.gait, t.shape[0])
    rec.t[:], rec.q[:], rec.v[:] = t, q, v
    for k in range(t.shape[0]):
        rec.effort[k] = effort(t[k], q[k], v[k])
        rec.q_d[k] = q_d
        rec.grf[k] = ctrl.grf
    rec.count = t.shape[0]
    rec.energy_account = {name: float(info[name][-1]) for name in ("contact", "joint_friction", "effort_work")}
    energy = []
    for k in (0, -1):
        plant.q[:], plant.v[:] = q[k], v[k]
        energy.append(sum(plant.energy()))
    rec.energy_change = energy[1] - energy[0]
    return rec


# -- the trot's support line (tests, plots) ------------------------------------------------------------------
TROT_PAIRS = ((0, 3), (1, 2))
"""Contact points of the quadruped's diagonal pair in stance on even steps (front-left, hind-right) and odd ones."""


def _line_offset(p, a, b) -> float:
    """Signed horizontal distance (m) of ``p`` from the line through ``a`` and ``b`` (positive left of a -> b)."""
    dx, dy = b[0] - a[0], b[1] - a[1]
    return float((dx * (p[1] - a[1]) - dy * (p[0] - a[0])) / math.hypot(dx, dy))


def _contact_positions(dyn, robot, q) -> np.ndarray:
    rot, pos = dyn.forward_kinematics(q)
    return np.array([pos[b] + rot[b] @ p for b, p in zip(robot.contact_bodies, robot.contact_points)])


def support_line_offsets(rec: WalkRecord) -> dict:
    """Where a quadruped trot stands relative to its support line, per sample of ``rec``.

    The line runs through the contact points of the diagonal pair the gait has in stance
    (:data:`TROT_PAIRS`). Returns (N,) arrays of signed horizontal distances from it (m):
    ``com`` the measured centre of mass (line through the measured feet), ``com_planned``
    the planned one (line through the planned feet), ``cop`` the centre of pressure of the
    ground reaction (NaN unless exactly the two stance feet carry load), and the bool
    ``two_feet`` marking those samples. Two point contacts put the centre of pressure on
    their line: there the ground exerts no moment about it, and gravity's moment about it
    is ``m g com``.
    """
    robot = rec.robot
    dyn = Dynamics(robot.model)
    planned, _ = rec.planned()
    n = rec.t.shape[0]
    out = {name: np.full(n, np.nan) for name in ("com", "com_planned", "cop")}
    out["two_feet"] = np.zeros(n, dtype=bool)
    for k in range(n):
        i, j = TROT_PAIRS[rec.gait.stance(rec.t[k])]
        feet, feet_planned = _contact_positions(dyn, robot, rec.q[k]), _contact_positions(dyn, robot, planned[k])
        out["com"][k] = _line_offset(dyn.center_of_mass(rec.q[k]), feet[i], feet[j])
        out["com_planned"][k] = _line_offset(dyn.center_of_mass(planned[k]), feet_planned[i], feet_planned[j])
        fz = rec.grf[k, :, 2]
        others = [c for c in range(fz.shape[0]) if c not in (i, j)]
        if fz[i] > 0.0 and fz[j] > 0.0 and not np.any(fz[others] > 0.0):
            out["two_feet"][k] = True
            out["cop"][k] = _line_offset(fz @ feet / fz.sum(), feet[i], feet[j])
    return out


def planned_zmp_offset(gait: QuadrupedGait, t: float, h: float = 1e-4) -> float:
    """Signed horizontal distance (m) of the zero-moment point of ``gait``'s planned motion at ``t`` from the line
    through its planned stance diagonal (:data:`TROT_PAIRS`).

    The ground wrench the motion needs is the rate of change of the bodies' momenta minus
    gravity's (central differences of the planned body poses, step ``h`` s; ``t`` at least
    ``2 h`` from a step boundary, where the plan's acceleration jumps); its zero-moment
    point on the ground ``z = 0`` is ``(-M_y / F_z, M_x / F_z)`` with ``M`` its moment
    about the world origin.
    """
    robot = gait.robot
    m = robot.model
    dyn = Dynamics(m)
    g = np.array([0.0, 0.0, float(np.linalg.norm(m.gravity))])

    def poses(tt):
        rot, pos = dyn.forward_kinematics(gait.state(tt)[0])
        return rot, pos + np.einsum("bij,bj->bi", rot, m.com)

    def momentum(tt):
        (ra, ca), (r0, c0), (rb, cb) = poses(tt - 0.5 * h), poses(tt), poses(tt + 0.5 * h)
        angular = np.zeros(3)
        for i in range(m.nbodies):
            spin = ((rb[i] - ra[i]) / h) @ r0[i].T
            omega = np.array([spin[2, 1], spin[0, 2], spin[1, 0]])
            angular += m.mass[i] * np.cross(c0[i], (cb[i] - ca[i]) / h) + r0[i] @ m.inertia_com[i] @ r0[i].T @ omega
        return angular

    (_, cm), (_, c0), (_, cp) = poses(t - h), poses(t), poses(t + h)
    force = (m.mass[:, None] * ((cp - 2.0 * c0 + cm) / (h * h) + g)).sum(axis=0)
    moment = (momentum(t + h) - momentum(t - h)) / (2.0 * h) + np.cross(c0, m.mass[:, None] * g).sum(axis=0)
    zmp = np.array([-moment[1] / force[2], moment[0] / force[2], 0.0])
    i, j = TROT_PAIRS[gait.stance(t)]
    feet = gait.feet(t)
    return _line_offset(zmp, feet[i], feet[j])
