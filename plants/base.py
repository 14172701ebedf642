"""The plant interface: a simulated robot the sim driver (and the HIL emulators) advance.

A plant owns its state ``q`` (nq), ``v`` (nv) and time ``t`` as arrays updated
in place, takes generalized efforts (nv, SI units; base rows zero for a
floating base) and advances by a fixed step. Plants are found by the name of their
entry point (group ``rtctl.plants``, through :data:`rtctl.registry.PLANTS`),
declare their ``[plant]`` keys as a dataclass ``Options`` (the common ones below,
plus their own), take it in their constructor and are built from config by
``from_config(options, context)``.
"""
from __future__ import annotations

import abc
import copy
import math
from dataclasses import dataclass

import numpy as np

from rtctl.model import Model, inertia_scale_factor, payload_mass, payload_offset
from rtctl.options import OptionsBase, setting
from rtctl.registry import PLANTS, RegisteredName
from rtctl.rt.stability import EXACT_HOLD


class Plant(abc.ABC):
    name = RegisteredName(PLANTS, "plant")   # its entry point's name
    sections: dict = {}  # whole config sections this plant owns: {"name": OptionsDataclass}
    contact_model = None  # the ground it simulates (rtctl.dynamics.contact.ContactModel), if any
    foot_names: tuple | list = ()   # the feet whose ground reaction foot_forces gives (contact sensors)
    # Of period^2 u, how far one step of constant acceleration u moves a coordinate: 1/2 when the integrator is
    # exact on it (RK4); rtctl.rt.stability bounds the controller's gains with it.
    position_share: float = EXACT_HOLD

    @dataclass(frozen=True)
    class Options(OptionsBase):
        """``[plant]`` keys every plant takes (SI units). Two are model errors the controller does not know:
        ``mass_scale`` and the payload (kg at ``payload_offset`` in ``payload_frame``)."""

        integrator: str = setting("str", None,   # default: the plant's
                                  choices=("rk4", "semi_implicit_euler", "rosenbrock"))
        substeps: int = setting("int", None, low=1, high=1000)
        viscous_friction: object = setting("floats", None, low=0.0)   # default: the URDF's <dynamics damping>, else 0
        coulomb_friction: object = setting("floats", None, low=0.0)   # default: the URDF's <dynamics friction>, else 0
        coulomb_velocity_scale: float = setting("float", 1e-3, positive=True)
        mass_scale: float = setting("float", 1.0, positive=True, high=100.0)
        payload_mass: float = setting("float", 0.0, low=0.0)
        payload_frame: str = setting("str", None)
        payload_offset: object = setting("floats", None)
        initial_position: object = setting("floats", None)   # actuated joints (default: the neutral pose)

    @classmethod
    def from_config(cls, options: dict, context, **arguments) -> "Plant":
        """Built over ``context.plant_model`` from its ``[plant]`` table (None: the plant's own default) and
        ``arguments`` (what a subclass adds from its own sections); starts at ``initial_position``. Friction
        given per actuated joint is handed over per DOF (zero on a floating base's)."""
        table = dict(options)
        for name in ("viscous_friction", "coulomb_friction", "static_friction", "stribeck_velocity"):
            if options.get(name) is None:  # not given, or a plant whose Options do not take the key
                continue
            full = np.zeros(context.plant_model.nv)
            full[context.v_index] = context.vector(options[name], name)
            table[name] = full
        plant = cls(context.plant_model, cls.Options(**table), **arguments)
        q0 = plant.q.copy()
        if options.get("initial_position") is not None:
            q0[context.q_index] = context.vector(options["initial_position"], "initial_position")
        plant.reset(q0)
        return plant

    def __init__(self, model: Model):
        self.model = model
        self.nq, self.nv = model.nq, model.nv
        self.q = model.neutral_configuration()
        self.v = np.zeros(model.nv)
        self.t = 0.0
        self.applied_effort = np.zeros(model.nv)  # what the sim drivers apply, each to its own joints

    def reset(self, q=None, v=None) -> None:
        """Set the state (defaults: neutral configuration, rest) and the time to zero."""
        self.q[:] = self.model.neutral_configuration() if q is None else np.asarray(q, dtype=float)
        self.v[:] = 0.0 if v is None else np.asarray(v, dtype=float)
        self.t = 0.0

    @abc.abstractmethod
    def step(self, dt: float, effort: np.ndarray) -> None:
        """Advance the state by ``dt`` seconds under the generalized ``effort`` (held constant)."""

    def foot_forces(self, out: np.ndarray) -> None:
        """The ground reaction on each of :attr:`foot_names` at the current state, world axes (N), into ``out``
        (``len(foot_names)`` x 3); allocation-free. A plant without feet has none to give."""
        raise NotImplementedError(f"plant '{self.name}' simulates no feet")

    def add_loop_hooks(self, loop) -> None:
        """Once the loop is built: attach what this component configures in a section it owns (a monitor, a
        feedback hook) to ``loop``. By default nothing. An error names its own ``[section]``."""

    def warm(self, dt: float) -> None:
        """Reach every kernel :meth:`step` calls before a run (:mod:`rtctl.rt.warmup`): by default one step of a
        copy of this plant, so that this one's state, time and counters stay as they are. A step the copy
        refuses (a state that diverges, a singular inertia) has reached its kernels all the same: the run's
        first step meets the refusal and trips the run with its line."""
        try:
            copy.deepcopy(self).step(dt, np.zeros(self.nv))
        except ValueError:
            pass

    def parameters(self) -> dict:
        return {}

    def sensor_wrench(self, body: int, mount: np.ndarray, out: np.ndarray) -> bool:
        """What a force-torque sensor fixed in ``body`` reads now, into ``out`` (6, ``[torque; force]``, N m and
        N): the wrench the body and everything it carries (its subtree, its external forces) exert across the
        sensor, about the sensor's point and in its axes (``mount``: 12 values, the sensor's axes in the body
        frame row-major, then its point in the body frame), at the plant's state and the acceleration its last
        effort gives (:func:`rtctl.dynamics.kernels.transmitted_wrench`). Allocation-free. False (the default):
        this plant cannot tell. ``body`` -1 is the world: a tree plant answers False (nothing is transmitted across
        a frame fixed to it); a parallel platform, whose moving platform is no body of its actuator-space model,
        reads a sensor its model places on the platform (frames attached to the world where they are at the rest
        pose, :meth:`rtctl.plants.jaw.plant.JawPlant.sensor_wrench`)."""
        return False

    def step_size_problem(self, dt: float) -> str:
        """One line if steps of ``dt`` s cannot be stable for this plant as set up (the sim driver refuses to
        run on it), else "". Default: no such limit known."""
        return ""


def time_step(dt) -> float:
    """``dt`` as a float, finite and > 0 s, or ValueError naming the value."""
    if not (isinstance(dt, (float, int)) and 0 < dt < math.inf):
        try:
            value = float(dt)
        except (TypeError, ValueError):
            value = math.nan
        if not 0 < value < math.inf:
            raise ValueError(f"dt must be a finite time step > 0 s, got {dt!r}")
        return value
    return dt


def check_integration_options(integrator, substeps, coulomb_velocity_scale, allowed=("rk4",)):
    """The fixed-step settings every plant takes (checked by :class:`Plant.Options`), the integrator among
    those this plant steps with (``allowed``); return ``(integrator, substeps, scale)``."""
    if integrator not in allowed:
        raise ValueError(f"integrator must be one of {sorted(allowed)}, got {integrator!r}")
    return integrator, int(substeps), float(coulomb_velocity_scale)


def plant_settings(plant, options, integrator: str = "rk4", substeps: int = 1) -> tuple:
    """``options`` (an instance of ``plant.Options`` or None) kept as ``plant.options``; returned, its common
    keys ``(integrator, substeps, viscous_friction, coulomb_friction, coulomb_velocity_scale, mass_scale,
    payload_mass, payload_frame, payload_offset)``: None integrator and substeps are the plant's defaults
    (``integrator``, ``substeps``), None friction is none."""
    from rtctl.options import options_of

    plant.options = o = options_of(plant, options)
    return (integrator if o.integrator is None else o.integrator, substeps if o.substeps is None else o.substeps,
            0.0 if o.viscous_friction is None else o.viscous_friction,
            0.0 if o.coulomb_friction is None else o.coulomb_friction, o.coulomb_velocity_scale, o.mass_scale,
            o.payload_mass, o.payload_frame, o.payload_offset)


def payload_settings(mass, frame, offset) -> dict:
    """The payload options as the plant's settings (mass validated; ``frame`` / ``offset`` None: defaults)."""
    return dict(payload_mass=payload_mass(mass), payload_frame=frame,
                payload_offset=None if offset is None else payload_offset(offset).tolist())


def with_tree_payload(model: Model, settings: dict, default_frame: str) -> Model:
    """``model`` with the payload of ``settings`` (from :func:`payload_settings`) fused into its tree."""
    if settings["payload_mass"] == 0 and settings["payload_frame"] is None and settings["payload_offset"] is None:
        return model
    offset = settings["payload_offset"] if settings["payload_offset"] is not None else (0.0, 0.0, 0.0)
    return model.with_payload(settings["payload_frame"] or default_frame, settings["payload_mass"], offset)


def mechanism_with_model_errors(mechanism, plant: str, body: str, mass_scale, payload_mass, payload_frame,
                                payload_offset):
    """``(mechanism', settings)``: a mechanism plant's model errors, every mass and inertia times
    ``mass_scale`` and a payload, which these formulations carry only at the centre of mass of ``body``."""
    scale = inertia_scale_factor(mass_scale)
    payload = payload_settings(payload_mass, payload_frame, payload_offset)
    offset = payload["payload_offset"]
    if payload_frame not in (None, body) or (offset is not None and any(x != 0 for x in offset)):
        raise ValueError(f"the {plant} plant carries a payload only at the centre of mass of its {body} "
                         f"(payload_frame '{body}', no payload_offset); got payload_frame={payload_frame!r}, "
                         f"payload_offset={offset!r}")
    return mechanism.with_inertia_scaled(scale).with_payload(payload["payload_mass"]), dict(mass_scale=scale,
                                                                                           **payload)


def stribeck_per_coordinate(static_friction, stribeck_velocity, coulomb, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(static - coulomb, v_s)`` per coordinate of a plant with ``n`` friction coordinates (the platforms'
    legs): zeros and ones without a Stribeck curve; ValueError naming the key otherwise wrong."""
    if static_friction is None:
        if stribeck_velocity is not None:
            raise ValueError("stribeck_velocity is given without static_friction (the static friction level)")
        return np.zeros(n), np.ones(n)
    if stribeck_velocity is None:
        raise ValueError("static_friction needs stribeck_velocity (rad/s or m/s, > 0): the speed over which "
                         "friction falls from the static to the Coulomb level")
    arrays = []
    for name, value, positive in (("static_friction", static_friction, False),
                                  ("stribeck_velocity", stribeck_velocity, True)):
        try:
            arr = np.broadcast_to(np.asarray(value, dtype=float), (n,)).copy()
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a number or {n} numbers, got {value!r}") from None
        if not np.all(np.isfinite(arr)) or np.any(arr <= 0 if positive else arr < 0):
            raise ValueError(f"{name} must be finite and {'> 0' if positive else '>= 0'} for every coordinate, "
                             f"got {arr.tolist()}")
        arrays.append(arr)
    return arrays[0] - np.broadcast_to(np.asarray(coulomb, dtype=float), (n,)), arrays[1]


def create_plant(name: str, model: Model, **options) -> Plant:
    return PLANTS.create(name, model, **options)
