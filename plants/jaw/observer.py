"""External-force observer of the jaw robot: the generalized-momentum residual of the robot platform and the
jaw model's mandible platform rigidly attached (:mod:`rtctl.plants.stewart.observer`, each platform's
momentum and C^T-like term from its own kernels (Lopes, 2009), the mandible's mapped by x' = S x + c and
E, :mod:`rtctl.plants.jaw.kernels`).

The observer's model is the mechanism only (robot, mandible, their legs): everything the patient does
-- the stiffness and damping of the jaw, the bite on a food bolus -- is the external force it
estimates, as a force sensor between robot and mandible would measure it. Frames: ``platform`` (the
centre of {P}) and ``incisal`` (the incisal point).
"""
from __future__ import annotations

import numpy as np

from rtctl.plants.stewart.observer import M_OFFSET, M_SIGN, M_TWIST, PlatformObserver

from . import kernels as _jk

# x' = S x + c and the twist / wrench map E (rtctl.plants.jaw.kernels module docstring).
JAW_COORDINATE_SIGNS = np.array([1.0, -1.0, -1.0, -1.0, -1.0, 1.0])
JAW_TWIST_SIGNS = np.array([1.0, -1.0, -1.0, 1.0, -1.0, -1.0])


def jaw_maps(skull_height: float) -> np.ndarray:
    """The ``maps`` of :class:`PlatformObserver` for (robot, mandible)."""
    maps = np.zeros((2, 3, 6))
    maps[0, M_SIGN] = maps[0, M_TWIST] = 1.0
    maps[1, M_SIGN], maps[1, M_TWIST] = JAW_COORDINATE_SIGNS, JAW_TWIST_SIGNS
    maps[1, M_OFFSET, 2] = skull_height
    return maps


def jaw_frames(mechanism) -> dict:
    return mechanism.platform_frames()


def jaw_observer(mechanism, gain, dt: float, frame: str = "incisal", **options) -> PlatformObserver:
    """The observer of a :class:`~rtctl.plants.jaw.model.JawRehabRobot` (the controller's model)."""
    P = mechanism.P
    platforms = [(mechanism.pts2[_jk.ROBOT], P[_jk.ROBOT, :len(mechanism.robot.par)]),
                 (mechanism.pts2[_jk.JAW], P[_jk.JAW, :len(mechanism.jaw.par)])]
    return PlatformObserver(platforms, gain, dt, frames=jaw_frames(mechanism), frame=frame,
                            home=mechanism.rest_pose, maps=jaw_maps(mechanism.skull_height), name="jaw observer",
                            **options)
