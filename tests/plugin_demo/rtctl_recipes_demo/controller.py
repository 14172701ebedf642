"""Recipe "add a controller": the rotor's exact inverse model plus PD, tau = J qdd_d + b qd_d + Kp e + Kd e'."""
from dataclasses import dataclass

import numpy as np

from rtctl.loops.base import Controller
from rtctl.options import setting
from rtctl.registry import CONTROLLERS


@CONTROLLERS.register("rotor_inverse_demo")
class RotorInverseModel(Controller):
    name = "rotor_inverse_demo"
    default_kp = 50.0

    @dataclass(frozen=True)
    class Options(Controller.Options):
        inertia: float = setting("float", 0.02, positive=True)
        damping: float = setting("float", 0.1, low=0.0)

    @classmethod
    def from_config(cls, options, context):
        return cls(context.dynamics, **cls.gains_from_config(options), inertia=options["inertia"],
                   damping=options["damping"])

    def __init__(self, dyn, kp, kd=None, inertia=0.02, damping=0.1):
        super().__init__(dyn, kp, kd)
        self.inertia, self.damping = inertia, damping
        self.activations = 0
        self._e = np.zeros(self.n)

    def on_activate(self):
        self.activations += 1

    def update(self, t, dt, q, v, q_d, qd_d, qdd_d, effort):
        effort[:] = 0.0
        effort[self.v_index] = self.inertia * qdd_d + self.damping * qd_d \
            + self.kp * (q_d - q[self.q_index]) + self.kd * (qd_d - v[self.v_index])
