"""What the CAN emulators share: the plant advanced in soft real time, and injected transport faults."""
from __future__ import annotations

import math
import time

import numpy as np


class PlantClock:
    """Advances a plant to wall-clock time under actuator torques (joint space, transmission ratio r).

    ``torque_fn(theta, omega, out, h)`` gives the motor torques for the next sub-step of ``h`` seconds from
    the motor angles and speeds (the firmware's own control law); without it the torques in
    ``motor_torque`` are held. Gaps longer than ``max_gap`` (nothing woke the emulator) are integrated
    only up to ``max_gap``."""

    def __init__(self, plant, v_index, ratio, max_substep=5e-4, max_gap=0.02, torque_fn=None):
        self.plant = plant
        self.v_index = np.asarray(v_index)
        self.ratio = np.asarray(ratio, dtype=float)
        self.max_substep, self.max_gap = max_substep, max_gap
        self.effort = np.zeros(plant.nv)
        self.motor_torque = np.zeros(len(self.v_index))  # actuator torque applied over the last sub-step
        self.torque_fn = torque_fn
        self.last = None
        self.steps = 0
        self.skipped = 0.0          # s of wall-clock time not integrated (gaps beyond max_gap)

    def motor_state(self):
        q = self.plant.q[self.v_index] * self.ratio  # 1-DOF joints: q index == v index for a fixed base
        v = self.plant.v[self.v_index] * self.ratio
        return q, v

    def advance(self, now: float) -> None:
        if self.last is None:
            self.last = now
            return
        dt = min(now - self.last, self.max_gap)
        self.skipped += max(0.0, now - self.last - dt)
        self.last = max(now, self.last)
        if dt <= 0:
            return
        n = max(1, math.ceil(dt / self.max_substep))
        h = dt / n
        for _ in range(n):
            if self.torque_fn is not None:
                theta, omega = self.motor_state()
                self.torque_fn(theta, omega, self.motor_torque, h)
            self.effort[self.v_index] = self.motor_torque * self.ratio
            self.plant.step(h, self.effort)
        self.steps += n


class Faults:
    """Transport faults: ``drop`` -- probability of not answering; ``delay_reply=(n, seconds)`` -- the n-th
    answer is sent late (the firmware stalls)."""

    def __init__(self, drop=0.0, delay_reply=None, seed=0):
        self.rng = np.random.default_rng(seed)
        self.drop = float(drop)
        self.delay_reply = delay_reply
        self.answers = 0
        self.dropped = 0
        self.delayed = 0

    def before_answer(self) -> bool:
        """False: drop this answer. Sleeps first when this is the answer to delay."""
        self.answers += 1
        if self.delay_reply and self.answers == self.delay_reply[0]:
            self.delayed += 1
            time.sleep(self.delay_reply[1])
        if self.drop and self.rng.random() < self.drop:
            self.dropped += 1
            return False
        return True
