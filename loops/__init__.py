"""Controllers and trajectory generators for the real-time loop.

:mod:`loops.base` defines the interfaces: a :class:`Trajectory` writes the
desired position, velocity and acceleration of the ``n`` actuated joints into
preallocated arrays; a :class:`Controller` turns the measured state (full
``q``, ``v``) and that desired motion into ``nv`` generalized efforts. Neither
allocates per cycle.

Trajectories (:mod:`loops.trajectories`): :class:`MinimumJerk`,
:class:`CubicSplineTrajectory`, :class:`Sinusoid`, and
:func:`create_trajectory` (kinds ``"min_jerk"``, ``"spline"``, ``"sinusoid"``).

Controllers (:mod:`loops.controllers`, control laws of seed 004, Shah, Saha &
Dutt, eqs. 31-37): :class:`FeedForwardPD` (eq. 31), :class:`ComputedTorque`
(eqs. 32, 37), :class:`FloatingBaseComputedTorque` (eqs. 33-37),
:class:`PDGravity`, :class:`PD`, and :func:`create_controller` (kinds
``"ff_pd"``, ``"computed_torque"``, ``"floating_base_computed_torque"``,
``"pd_gravity"``, ``"pd"``).
"""
from .base import Controller, Trajectory
from .controllers import (
    CONTROLLER_KINDS,
    PD,
    ComputedTorque,
    FeedForwardPD,
    FloatingBaseComputedTorque,
    PDGravity,
    create_controller,
)
from .trajectories import TRAJECTORY_KINDS, CubicSplineTrajectory, MinimumJerk, Sinusoid, create_trajectory
from . import stewart  # noqa: F401  registers "stewart_computed_torque" and "stewart_pose"
from . import geared  # noqa: F401  registers "geared_computed_torque" (seed 002)
from . import quadruped_tail  # noqa: F401  registers the seed-000 quadruped-with-tail controllers and trajectories
from . import jaw  # noqa: F401  registers "jaw_ff_pd" and "jaw_computed_torque" (seed 003)
from .cpg import trajectory as _jaw_cpg  # noqa: F401  registers "jaw_cpg" (the chewing CPG driving the jaw robot)
from . import legged  # noqa: F401  registers "legged_ff_pd", "legged_computed_torque", "biped_walk", "quadruped_trot"

__all__ = [
    "CONTROLLER_KINDS", "PD", "TRAJECTORY_KINDS", "ComputedTorque", "Controller", "CubicSplineTrajectory",
    "FeedForwardPD", "FloatingBaseComputedTorque", "MinimumJerk", "PDGravity", "Sinusoid", "Trajectory",
    "create_controller", "create_trajectory",
]
