"""The ``mujoco`` plant: a MuJoCo simulation behind the same interface as rtctl's own plants.

:class:`MujocoPlant` owns a compiled ``MjModel`` and its ``MjData``. Each :meth:`~MujocoPlant.step` takes
the generalized efforts of the sim driver (rtctl's v coordinates, base rows zero for a floating base),
hands them to MuJoCo through the model's motor actuators (``actuation = "motor"``: ``ctrl = tau /
(gear gain)``, so MuJoCo's control range saturates them as the motor would) or as applied generalized
forces (``actuation = "generalized"``: ``qfrc_applied``, with MuJoCo's actuators disabled: a position
servo's control is a set-point, not a torque, and its spring would fight the controller). ``"auto"`` (the
default) takes the motors when every actuated joint has exactly one plain motor, else generalized forces;
the effort limits stay the actuators' (their ``forcerange``, :mod:`rtctl.plants.mujoco.model`), which the
sim driver saturates at. It advances ``substeps`` MuJoCo steps of ``dt /
substeps`` (``mj_step``: MuJoCo's integrator, contact, joint limits, damping and armature) and writes the
state back into ``q``, ``v`` in rtctl's conventions (:mod:`rtctl.plants.mujoco.model`). The measurement
(encoder quantisation, noise, latency) is the sim driver's, as for every plant; across processes the HIL
emulators step it like any other plant (``PlantClock`` calls ``step(h, effort)`` with varying ``h``).

The rtctl model the plant reports (``plant.model``) is built from the same compiled ``MjModel``
(:func:`~rtctl.plants.mujoco.model.model_from_mujoco`); one given by the config (``[robot] model``) must
have the same joints in the same order, or the plant refuses it naming the first that differs.

A step allocates nothing: the effort and state conversions are compiled (numba) and ``mj_step`` works in
MuJoCo's preallocated ``MjData``. MuJoCo's own reset on divergence is disabled: a step that makes the
state NaN or inf raises ``ValueError`` instead.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import numpy as np
from numba import njit

from rtctl.model import Model, inertia_scale_factor
from rtctl.model.package_file import is_package_url, package_file
from rtctl.options import OptionsBase, options_of, setting, show, show_all
from rtctl.rt.interfaces import actuated_indices

from ..base import Plant, time_step
from .model import MujocoModelError, _name, compile_model, is_plain_motor, model_from_mujoco, require_mujoco
from .state import to_mujoco_state, to_rtctl_state

__all__ = ["MujocoPlant", "bundled_model", "BUNDLED_MODELS", "INTEGRATORS", "ACTUATIONS", "panda_model", "solo12_model"]

INTEGRATORS = ("euler", "implicitfast", "implicit", "rk4")
ACTUATIONS = ("auto", "motor", "generalized")
BUNDLED_MODELS = ("panda", "solo12", "planar_biped")

OK, EFFORT_NOT_FINITE, STATE_NOT_FINITE = 0, 1, 2


def bundled_model(name: str) -> Path:
    """The path of a model file shipped with this package (``panda``, ``solo12``, ``planar_biped``)."""
    if name not in BUNDLED_MODELS:
        raise MujocoModelError(f"no bundled MuJoCo model {show(name)}; bundled: {list(BUNDLED_MODELS)}")
    return Path(os.fspath(files(__package__) / f"{name}.xml"))


def panda_model() -> Model:
    """The robot model ``"mujoco_panda"``: the bundled Panda arm (7 DOF) as MuJoCo compiles it."""
    from .model import load_mujoco_model
    return load_mujoco_model(bundled_model("panda"))[0]


def solo12_model() -> Model:
    """The robot model ``"mujoco_solo12"``: the bundled Solo 12 quadruped (free-flyer base, 12 joints)."""
    from .model import load_mujoco_model
    return load_mujoco_model(bundled_model("solo12"))[0]


def resolve_model_file(spec: str, base_dir: str | None = None) -> Path:
    """A bundled model name, a ``package://`` URL's file (:mod:`rtctl.model.package_file`), or an MJCF/URDF path
    (relative to ``base_dir``, the config file's folder)."""
    if spec in BUNDLED_MODELS:
        return bundled_model(spec)
    if is_package_url(spec):
        try:
            return package_file(spec)
        except (ValueError, FileNotFoundError) as exc:
            raise MujocoModelError(f"model: {exc}") from None
    path = Path(spec)
    if not path.is_absolute() and base_dir is not None:
        path = Path(base_dir) / path
    if not path.is_file():
        raise MujocoModelError(f"model: no such file {show(str(path))} (an MJCF .xml or URDF .urdf file, relative "
                               f"to the config file, or a bundled model: {list(BUNDLED_MODELS)})")
    return path


@njit(cache=True)
def _apply_effort(effort, free, qpos, dof, scale, actuator, generalized, ctrl):
    """rtctl's generalized ``effort`` into MuJoCo: with motor actuation (``actuator`` not empty)
    ``ctrl[actuator[k]] = effort[dof[k]] * scale[k]``, else the ``generalized`` forces themselves (a
    free-flyer's force rotated from body to world axes: qvel = T v with T = diag(R, I) gives f_mj = T^-T f =
    T f). EFFORT_NOT_FINITE if any entry is NaN or inf (nothing written)."""
    for k in range(effort.shape[0]):
        if not math.isfinite(effort[k]):
            return EFFORT_NOT_FINITE
    if actuator.shape[0] > 0:
        for k in range(dof.shape[0]):
            ctrl[actuator[k]] = effort[dof[k]] * scale[k]
        return OK
    for k in range(effort.shape[0]):
        generalized[k] = effort[k]
    if free:
        w, x, y, z = qpos[3], qpos[4], qpos[5], qpos[6]
        n = w * w + x * x + y * y + z * z
        a, b, c = effort[0], effort[1], effort[2]
        generalized[0] = (1 - 2 * (y * y + z * z) / n) * a + 2 * (x * y - z * w) / n * b + 2 * (x * z + y * w) / n * c
        generalized[1] = 2 * (x * y + z * w) / n * a + (1 - 2 * (x * x + z * z) / n) * b + 2 * (y * z - x * w) / n * c
        generalized[2] = 2 * (x * z - y * w) / n * a + 2 * (y * z + x * w) / n * b + (1 - 2 * (x * x + y * y) / n) * c
    return OK


@njit(cache=True)
def _read_state(qpos, qvel, free, q, v):
    """MuJoCo's state into rtctl's ``q``, ``v``; STATE_NOT_FINITE if it holds NaN or inf."""
    for k in range(qpos.shape[0]):
        if not math.isfinite(qpos[k]):
            return STATE_NOT_FINITE
    for k in range(qvel.shape[0]):
        if not math.isfinite(qvel[k]):
            return STATE_NOT_FINITE
    to_rtctl_state(qpos, qvel, free, q, v)
    return OK


class MujocoPlant(Plant):
    """A MuJoCo model as a plant (see the module docstring).

    Parameters
    ----------
    model : the rtctl model the controller uses; None: built from the MuJoCo model. Its joints must be the
        MuJoCo model's, in order (names, types, nq, nv).
    source : an MJCF (``.xml``) or URDF (``.urdf``) path, a bundled model name, or a compiled ``MjModel``.
    floating_base : ``"free_flyer"`` puts a free joint on a URDF's root link (MJCF declares its own).
    substeps : MuJoCo steps per :meth:`step` (each ``dt / substeps``).
    integrator : MuJoCo's ``euler``, ``implicitfast``, ``implicit`` or ``rk4``; None: the model's own.
    actuation : ``"motor"`` (through the model's motor actuators, one per actuated joint),
        ``"generalized"`` (``qfrc_applied``: every DOF, MuJoCo's actuators disabled) or ``"auto"`` (motor if
        every actuated joint has one plain motor, else generalized: Menagerie's position servos).
    contact : False disables MuJoCo's contacts (joint limits stay).
    mass_scale : every body's mass and inertia times this (a model error the controller does not know).
    lock_joints : joints of the file removed, their bodies welded at ``qpos0`` (a gripper's fingers on an arm;
        :func:`~rtctl.plants.mujoco.model.compile_model`); build the controller's model with the same list.
    """

    @dataclass(frozen=True)
    class Options(OptionsBase):
        """``[plant]`` keys of the MuJoCo plant (SI units)."""

        model: str = setting("str", None)   # MJCF/URDF path (relative to the config), package://PACKAGE/PATH or
        #                                      bundled name; default: the [robot] model file
        floating_base: str = setting("str", "fixed", choices=("fixed", "free_flyer"))   # a URDF's root link
        substeps: int = setting("int", 1, low=1, high=1000)
        integrator: str = setting("str", None, choices=INTEGRATORS)    # default: the model's <option integrator>
        actuation: str = setting("str", "auto", choices=ACTUATIONS)   # auto: motor if all are motors
        contact: bool = setting("bool", True)
        mass_scale: float = setting("float", 1.0, positive=True, high=100.0)
        initial_position: object = setting("floats", None)   # actuated joints (default: the model's qpos0)
        initial_base_position: object = setting("floats", None)   # m, a free-flyer base's [x, y, z] (default: qpos0)
        # bodies whose contacts, and those of the bodies below them, are a foot's (default: a floating base's leaves)
        feet: object = setting("strs", None)

    @classmethod
    def from_config(cls, options: dict, context) -> "MujocoPlant":
        if options["model"] is None and context.model_file is None:
            raise ValueError("model: give the MJCF or URDF file MuJoCo simulates (or make [robot] model that file)")
        source = resolve_model_file(options["model"], context.base_dir) if options["model"] is not None \
            else context.model_file
        lock_joints = context.lock_joints if options["model"] is None else ()   # the [robot] file's, as the
        plant = cls(context.plant_model, cls.Options(**options), source=source,   # controller's model has them
                    lock_joints=lock_joints)
        q0 = plant.q.copy()
        if options.get("initial_position") is not None:
            q0[context.q_index] = context.vector(options["initial_position"], "initial_position")
        if options.get("initial_base_position") is not None:
            if not plant.model.has_free_flyer:
                raise ValueError(f"initial_base_position: the model {show(plant.model.name)} has no free-flyer base "
                                 f"(its base is {show(plant.model.base)})")
            q0[0:3] = context.vector(options["initial_base_position"], "initial_base_position", 3)
        plant.reset(q0)
        return plant

    def __init__(self, model: Model | None = None, options: "MujocoPlant.Options | None" = None, *, source,
                 lock_joints=()):
        """``source`` is the file ``options.model`` names, resolved (:meth:`from_config`), or an ``MjModel``."""
        mujoco = require_mujoco()
        self.options = options = options_of(self, options)
        floating_base, substeps, integrator = options.floating_base, options.substeps, options.integrator
        actuation, contact = options.actuation, options.contact
        if isinstance(source, mujoco.MjModel):
            if lock_joints:
                raise ValueError("lock_joints applies to a model file, not to a compiled MjModel")
            mj_model, label = source, f"<MjModel {source.nbody - 1} bodies>"
        else:
            path = resolve_model_file(os.fspath(source))
            mj_model, label = compile_model(path, floating_base=floating_base, lock_joints=lock_joints), str(path)
        mass_scale = inertia_scale_factor(options.mass_scale)
        own = model_from_mujoco(mj_model, label=label)
        if model is None:
            model = own
        else:
            _check_same_joints(model, own, label)
        super().__init__(model)
        self.mj_model = mj_model
        self.source = label
        if mass_scale != 1.0:
            mj_model.body_mass[:] *= mass_scale
            mj_model.body_inertia[:] *= mass_scale
        if integrator is not None:
            mj_model.opt.integrator = {"euler": mujoco.mjtIntegrator.mjINT_EULER,
                                       "implicitfast": mujoco.mjtIntegrator.mjINT_IMPLICITFAST,
                                       "implicit": mujoco.mjtIntegrator.mjINT_IMPLICIT,
                                       "rk4": mujoco.mjtIntegrator.mjINT_RK4}[integrator]
        mj_model.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_AUTORESET)
        if not contact:
            mj_model.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
        self.mj_data = mujoco.MjData(mj_model)
        if mass_scale != 1.0:
            mujoco.mj_setConst(mj_model, self.mj_data)
        self._mj_step = mujoco.mj_step
        self._mj_contact_force = mujoco.mj_contactForce
        self._mj_forward = mujoco.mj_forward
        self._option = mj_model.opt
        self._qpos, self._qvel = self.mj_data.qpos, self.mj_data.qvel          # views into MjData, kept
        self._ctrl, self._qfrc_applied = self.mj_data.ctrl, self.mj_data.qfrc_applied
        self._free = bool(model.has_free_flyer)
        self._substeps = substeps
        self._dt = math.nan
        motors = (np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0, dtype=np.int64))
        if actuation == "motor":
            motors = _motor_map(mujoco, mj_model, model, label)
        elif actuation == "auto":
            try:
                motors, actuation = _motor_map(mujoco, mj_model, model, label), "motor"
            except ValueError:
                actuation = "generalized"
        if actuation == "generalized":                # qfrc_applied alone: no servo spring, no motor
            mj_model.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_ACTUATION)
        self._actuation = actuation
        self._motor_dof, self._motor_scale, self._motor_actuator = motors
        self._settings = {"model": label, "floating_base": floating_base, "substeps": substeps,
                          "integrator": integrator, "actuation": actuation, "contact": contact,
                          "mass_scale": mass_scale, "lock_joints": list(lock_joints)}
        self._feet_of_geoms(mujoco, options.feet)
        self.reset(_initial_configuration(mj_model, model))

    def _feet_of_geoms(self, mujoco, feet) -> None:
        """:attr:`foot_names` (the given bodies, or the leaf bodies of a floating-base tree) and the foot each
        of MuJoCo's geoms belongs to (-1: none): the nearest foot at or above its body, so that a lower leg named
        as the foot takes the contacts of its collision mesh and of a foot body welded below it (Spot's)."""
        m = self.mj_model
        names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b) or f"body{b}" for b in range(m.nbody)]
        if feet is None:
            parents = set(int(p) for p in m.body_parentid[1:])
            feet = [names[b] for b in range(1, m.nbody) if b not in parents] if self.model.base != "fixed" else []
        unknown = [f for f in feet if f not in names]
        if unknown:
            raise ValueError(f"feet: {show_all(unknown)} are not bodies of {show(self.source)}; its bodies: "
                             f"{show_all(names[1:])}")
        self.foot_names = list(feet)
        foot_of_body = np.full(m.nbody, -1, dtype=np.int64)
        for b in range(1, m.nbody):              # parents come before their children
            own = self.foot_names.index(names[b]) if names[b] in self.foot_names else -1
            foot_of_body[b] = own if own >= 0 else foot_of_body[m.body_parentid[b]]
        self._geom_foot = foot_of_body[m.geom_bodyid]
        self._contact_wrench = np.zeros(6)
        self._feet = np.zeros((len(self.foot_names), 3))
        self._feet_at = math.nan     # the plant time self._feet was summed at

    def foot_forces(self, out: np.ndarray) -> None:
        """The force of MuJoCo's contacts on each foot at the current state, world axes (N): each contact's
        force in its frame (``mj_contactForce``, on the second geom) rotated to the world. Computed once per
        state (each foot's contact sensor asks in the same cycle)."""
        if self._feet_at != self.t:
            self._sum_foot_forces(self._feet)
            self._feet_at = self.t
        out[:] = self._feet

    def _sum_foot_forces(self, out: np.ndarray) -> None:
        out[:] = 0.0
        data, wrench = self.mj_data, self._contact_wrench
        for k in range(data.ncon):
            contact = data.contact[k]
            for geom, sign in ((contact.geom2, 1.0), (contact.geom1, -1.0)):
                foot = self._geom_foot[geom]
                if foot >= 0:
                    self._mj_contact_force(self.mj_model, data, k, wrench)
                    out[foot] += sign * (contact.frame.reshape(3, 3).T @ wrench[:3])

    def reset(self, q=None, v=None) -> None:
        """Set the state (defaults: the MuJoCo model's ``qpos0``, rest), MuJoCo's with it, and the time to zero."""
        mujoco = require_mujoco()
        mujoco.mj_resetData(self.mj_model, self.mj_data)
        q = _initial_configuration(self.mj_model, self.model) if q is None else q
        super().reset(q, v)
        to_mujoco_state(self.q, self.v, self._free, self._qpos, self._qvel)
        self._mj_forward(self.mj_model, self.mj_data)
        self._feet_at = math.nan

    def step(self, dt: float, effort) -> None:
        """Advance q, v (in place) and t by ``dt`` seconds with ``effort`` (nv generalized forces) held constant.

        ValueError (state unchanged) for a bad ``dt`` or an effort of the wrong length or not finite;
        ValueError after a step that made MuJoCo's state NaN or inf."""
        if not (type(dt) is float and 0.0 < dt < math.inf):
            dt = time_step(dt)
        if type(effort) is not np.ndarray or effort.dtype != np.float64 or effort.shape != (self.nv,):
            effort = self._converted_effort(effort)
        if _apply_effort(effort, self._free, self._qpos, self._motor_dof, self._motor_scale, self._motor_actuator,
                         self._qfrc_applied, self._ctrl) != OK:
            raise ValueError("effort contains NaN or inf")
        if dt != self._dt:
            self._dt = dt
            self._option.timestep = dt / self._substeps
        for _ in range(self._substeps):
            self._mj_step(self.mj_model, self.mj_data)
        if _read_state(self._qpos, self._qvel, self._free, self.q, self.v) != OK:
            raise ValueError(f"the MuJoCo simulation diverged (the state became NaN or inf) in a step of {dt} s "
                             f"with {self._substeps} sub-step(s); reduce the step or add substeps")
        self.t += dt

    def _converted_effort(self, effort) -> np.ndarray:
        try:
            arr = np.ascontiguousarray(effort, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"effort must be a numeric vector of length nv = {self.nv}") from None
        if arr.shape != (self.nv,):
            raise ValueError(f"effort must have shape ({self.nv},), got {arr.shape}")
        return arr

    def energy(self) -> tuple[float, float]:
        """(kinetic, potential) energy of the current state in J as MuJoCo computes it (``mj_energyPos``,
        ``mj_energyVel``): the kinetic energy includes the rotors' (armature), the potential is zero at the world
        origin height. Not real-time (a full ``mj_forward``)."""
        mujoco = require_mujoco()
        mujoco.mj_forward(self.mj_model, self.mj_data)
        mujoco.mj_energyPos(self.mj_model, self.mj_data)
        mujoco.mj_energyVel(self.mj_model, self.mj_data)
        return float(self.mj_data.energy[1]), float(self.mj_data.energy[0])

    def contact_forces(self) -> np.ndarray:
        """Each active contact's force in world axes (ncon, 3), normal and friction, N (allocates)."""
        mujoco = require_mujoco()
        out = np.zeros((self.mj_data.ncon, 3))
        wrench = np.zeros(6)
        for k in range(self.mj_data.ncon):
            mujoco.mj_contactForce(self.mj_model, self.mj_data, k, wrench)
            frame = self.mj_data.contact[k].frame.reshape(3, 3)
            out[k] = frame.T @ wrench[:3]
        return out

    def parameters(self) -> dict:
        return dict(self._settings)

    def __repr__(self) -> str:
        return f"MujocoPlant({self.source!r}, actuation={self._actuation!r}, substeps={self._substeps})"


def _initial_configuration(mj_model, model: Model) -> np.ndarray:
    """The MuJoCo model's reference configuration ``qpos0`` in rtctl's coordinates."""
    q = np.zeros(model.nq)
    to_rtctl_state(np.array(mj_model.qpos0), np.zeros(mj_model.nv), bool(model.has_free_flyer), q, np.zeros(model.nv))
    return q


def _check_same_joints(model: Model, own: Model, label: str) -> None:
    """ValueError naming the first joint where ``model`` (the config's) and the MuJoCo model's differ."""
    for k in range(max(model.nbodies, own.nbodies)):
        ours = (model.joint_names[k], int(model.joint_type[k])) if k < model.nbodies else None
        theirs = (own.joint_names[k], int(own.joint_type[k])) if k < own.nbodies else None
        if ours != theirs:
            raise ValueError(f"the robot model {show(model.name)} and the MuJoCo model {label} differ at joint {k}: "
                             f"{ours} vs {theirs} (name, type); the plant must simulate the controller's robot")
    if (model.nq, model.nv) != (own.nq, own.nv):
        raise ValueError(f"the robot model {show(model.name)} has nq, nv = {model.nq}, {model.nv}; the MuJoCo model "
                         f"{label} has {own.nq}, {own.nv}")


def _motor_map(mujoco, mj_model, model: Model, label: str):
    """(dof, ctrl per N m, actuator) of the one motor actuator on each actuated joint; ValueError naming a joint with
    none, with several, or an actuator that is not a plain motor (gain fixed, no bias, no activation)."""
    _, v_index, names = actuated_indices(model)
    by_dof: dict[int, list[int]] = {}
    for a in range(mj_model.nu):
        if int(mj_model.actuator_trntype[a]) == int(mujoco.mjtTrn.mjTRN_JOINT):
            j = mj_model.actuator_trnid[a, 0]
            by_dof.setdefault(int(mj_model.jnt_dofadr[j]), []).append(a)
    dofs, scales, actuators = [], [], []
    for iv, name in zip(v_index, names):
        found = by_dof.get(int(iv), [])
        if len(found) != 1:
            raise ValueError(f"actuation 'motor': joint {show(name)} of {label} has {len(found)} joint actuators "
                             f"(needs exactly one motor); use actuation = 'generalized' or add a "
                             f"<motor joint={show(name)}/>")
        a = found[0]
        actuator = _name(mujoco, mj_model, mujoco.mjtObj.mjOBJ_ACTUATOR, a, f"#{a}", label)
        gain = float(mj_model.actuator_gainprm[a, 0] * mj_model.actuator_gear[a, 0])
        if not is_plain_motor(mujoco, mj_model, a) or gain == 0.0:
            servo = int(mj_model.actuator_biastype[a]) != int(mujoco.mjtBias.mjBIAS_NONE)
            raise ValueError(f"actuation 'motor': actuator {show(actuator)} on joint {show(name)} of {label} is not "
                             f"a motor (fixed gain, no bias or activation dynamics)"
                             + ("; it is a servo whose control is a set-point (a position for a position servo), "
                                "not a torque" if servo else "")
                             + "; use actuation = 'generalized' (torques as applied generalized forces, the "
                             "actuators disabled) or 'auto'")
        dofs.append(int(iv))
        scales.append(1.0 / gain)
        actuators.append(a)
    return np.array(dofs, dtype=np.int64), np.array(scales), np.array(actuators, dtype=np.int64)
