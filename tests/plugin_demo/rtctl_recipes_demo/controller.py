"""Recipe "add a controller": the rotor's exact inverse model plus PD, tau = J qdd_d + b qd_d + Kp e + Kd e'."""
from dataclasses import dataclass

import numpy as np

from rtctl.loops.base import Controller
from rtctl.options import setting


class RotorInverseModel(Controller):   # named by its entry point (entry_points.txt)
    default_kp = 50.0

    @dataclass(frozen=True)
    class Options(Controller.Options):
        inertia: float = setting("float", 0.02, positive=True)
        damping: float = setting("float", 0.1, low=0.0)

    def __init__(self, dyn, options=None):
        super().__init__(dyn, options)
        self.inertia, self.damping = self.options.inertia, self.options.damping
        self.activations = 0
        self._e = np.zeros(self.n)

    def on_activate(self):
        self.activations += 1

    def update(self, t, dt, q, v, q_d, qd_d, qdd_d, effort):
        effort[:] = 0.0
        effort[self.v_index] = self.inertia * qdd_d + self.damping * qd_d \
            + self.kp * (q_d - q[self.q_index]) + self.kd * (qd_d - v[self.v_index])
