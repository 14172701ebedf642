"""Recipe "add a plant": independent rotors J qdd + b qd = tau, integrated exactly over each step."""
import math
from dataclasses import dataclass

from rtctl.options import OptionsBase, options_of, setting
from rtctl.plants.base import Plant


class RotorPlant(Plant):   # named by its entry point (entry_points.txt)
    @dataclass(frozen=True)
    class Options(OptionsBase):  # its own keys only: none of the common plant keys (friction, payload, ...) apply
        inertia: float = setting("float", 0.02, positive=True)     # kg m^2 per joint
        damping: float = setting("float", 0.1, low=0.0)            # N m s/rad per joint
        initial_position: object = setting("floats", None)         # rad per joint

    def __init__(self, model, options=None):
        super().__init__(model)
        self.options = options_of(self, options)
        self.inertia, self.damping = self.options.inertia, self.options.damping

    def step(self, dt, effort):
        """Exact solution under constant torque: v -> v_inf + (v - v_inf) e^(-b dt / J)."""
        J, b = self.inertia, self.damping
        if b == 0.0:
            self.q += self.v * dt + 0.5 * effort / J * dt * dt
            self.v += effort / J * dt
        else:
            v_inf = effort / b
            decay = math.exp(-b * dt / J)
            self.q += v_inf * dt + (self.v - v_inf) * (J / b) * (1.0 - decay)
            self.v[:] = v_inf + (self.v - v_inf) * decay
        self.t += dt

    def parameters(self):
        return {"inertia": self.inertia, "damping": self.damping}

