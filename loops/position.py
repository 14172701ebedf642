"""Joint-position control by the drives' own loops: the ``joint_position`` controller.

A drive in position mode closes the joint loop itself, at its own rate, as

    tau = effort + K (position - q) + D (velocity - v)

(the MIT motors' PD, a Dynamixel's position controller, a simulated drive). This controller hands it the
trajectory's ``q_d`` and ``qd_d`` as ``position`` and ``velocity``, its ``kp`` and ``kd`` (N m/rad, N m s/rad
per joint) as ``stiffness`` and ``damping``, and a feed-forward ``effort`` from the model: none, the gravity
``g(q)`` of the measured configuration, or the inverse dynamics ``ID(q_d, qd_d, qdd_d)`` along the desired
motion (Siciliano et al., *Robotics: Modelling, Planning and Control*, Springer 2009, sections 8.5 and 8.6:
PD with gravity compensation, and feed-forward computed torque). At rest under gravity compensation the drive
holds ``q_d`` exactly; without it, at the joint configuration where ``K (q_d - q) = g(q)``.

Where a drive takes no stiffness or damping (a Dynamixel's position gains are its own control-table
registers), it follows the position with its own gains; a stiffness of 0 on a joint tells it to hold where it
is. :attr:`writes` says which command fields it fills, so a position-mode driver under an effort controller
(or the reverse) is refused when the config is built.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from rtctl.options import options_of, setting

from .base import Controller
from .controllers import MODE_FF_PD, MODE_PD, MODE_PD_GRAVITY, _CompiledController, _control_step

FEEDFORWARD = {"none": MODE_PD, "gravity": MODE_PD_GRAVITY, "inverse_dynamics": MODE_FF_PD}


@njit(cache=True)
def _set_points(v_index, q_d, qd_d, kp, kd, position, velocity, stiffness, damping):
    """The drives' set points on the actuated joints: position, velocity, stiffness, damping."""
    for j in range(v_index.shape[0]):
        iv = v_index[j]
        position[iv] = q_d[j]
        velocity[iv] = qd_d[j]
        stiffness[iv] = kp[j]
        damping[iv] = kd[j]


class JointPosition(_CompiledController):
    """Position set points for the drives' own PD, with a model feed-forward effort (module docstring)."""

    writes = ("effort", "position", "velocity", "stiffness", "damping")

    @dataclass(frozen=True)
    class Options(Controller.Options):
        # the drives' stiffness (kp, N m/rad) and damping (kd, N m s/rad) per joint; the model term they add to
        feedforward: str = setting("str", "gravity", choices=tuple(FEEDFORWARD))

    def __init__(self, dyn, options: "JointPosition.Options | None" = None):
        options = options_of(self, options)
        self.mode = FEEDFORWARD[options.feedforward]
        self.feedforward = options.feedforward
        super().__init__(dyn, options)
        self._no_gains = np.zeros(self.n)

    def update(self, t, dt, q, v, q_d, qd_d, qdd_d, effort) -> None:
        """The feed-forward effort alone (the drives add the PD on their set points)."""
        try:
            status = _control_step(self.mode, self.dyn.mi, self.dyn.mf, self.dyn.ws, self.index, self._no_gains,
                                   self._no_gains, self._work, self._base_block, q, v, q_d, qd_d, qdd_d, effort)
        except TypeError:
            args, _, _ = self._converted_inputs(q, v, q_d, qd_d, qdd_d, effort)
            status = _control_step(self.mode, self.dyn.mi, self.dyn.mf, self.dyn.ws, self.index, self._no_gains,
                                   self._no_gains, self._work, self._base_block, *args, effort)
        if status != 0:
            self._raise(status)

    def update_command(self, t, dt, q, v, q_d, qd_d, qdd_d, command) -> None:
        self.update(t, dt, q, v, q_d, qd_d, qdd_d, command.effort)
        try:
            _set_points(self.v_index, q_d, qd_d, self.kp, self.kd, command.position, command.velocity,
                        command.stiffness, command.damping)
        except TypeError:
            _set_points(self.v_index, np.ascontiguousarray(q_d, dtype=float), np.ascontiguousarray(qd_d, dtype=float),
                        np.ascontiguousarray(self.kp, dtype=float), np.ascontiguousarray(self.kd, dtype=float),
                        command.position, command.velocity, command.stiffness, command.damping)

    def __repr__(self):
        return f"JointPosition(kp={self.kp.tolist()}, kd={self.kd.tolist()}, feedforward={self.feedforward!r})"
