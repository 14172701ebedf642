"""Controllers and trajectory generators for the real-time loop (robot-independent).

:mod:`rtctl.loops.base` defines the interfaces: a :class:`Trajectory` writes the
desired position, velocity and acceleration of the ``n`` actuated joints into
preallocated arrays; a :class:`Controller` turns the measured state (full
``q``, ``v``) and that desired motion into ``nv`` generalized efforts. Neither
allocates per cycle.

Trajectories (:mod:`rtctl.loops.trajectories`): :class:`MinimumJerk`,
:class:`CubicSplineTrajectory`, :class:`Sinusoid` (kinds ``"min_jerk"``,
``"spline"``, ``"sinusoid"``). Controllers (:mod:`rtctl.loops.controllers`,
the control laws of Shah, Saha & Dutt, 2012, eqs. 31-37): :class:`FeedForwardPD`
(eq. 31), :class:`ComputedTorque` (eqs. 32, 37), :class:`FloatingBaseComputedTorque`
(eqs. 33-37), :class:`PDGravity`, :class:`PD`. :mod:`rtctl.loops.cpg`: the
central pattern generator. A robot's own controllers live in its folder
(``rtctl.plants.<robot>.control``); all are found by name in
:data:`rtctl.registry.CONTROLLERS` and :data:`rtctl.registry.TRAJECTORIES`.
"""
from .base import Controller, Trajectory
from .controllers import PD, ComputedTorque, FeedForwardPD, FloatingBaseComputedTorque, PDGravity, create_controller
from .trajectories import CubicSplineTrajectory, MinimumJerk, Sinusoid, create_trajectory

__all__ = [
    "PD", "ComputedTorque", "Controller", "CubicSplineTrajectory", "FeedForwardPD", "FloatingBaseComputedTorque",
    "MinimumJerk", "PDGravity", "Sinusoid", "Trajectory", "create_controller", "create_trajectory",
]
