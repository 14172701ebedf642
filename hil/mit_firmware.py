"""Emulated MIT-mode motors: the mini-cheetah motor controller firmware (Ben Katz, ``bgkatz/motorcontrol``).

What is emulated, with the firmware source it follows (STM32 version: ``Core/Src/stm32f4xx_it.c``
``CAN1_RX0_IRQHandler``, ``Core/Src/fsm.c``, ``Core/Src/can.c``, ``Core/Src/foc.c``):

* Every standard frame to the motor's CAN ID is answered, and the answer is packed *before* the frame
  is handled: 6 bytes to the host ID (``CAN_MASTER``), ``[CAN_ID, p[15:8], p[7:0], v[11:4], v[3:0] t[11:8],
  t[7:0]]`` with the position since the zero, the velocity and the torque the motor is making.
* ``FF FF FF FF FF FF FF FC`` enters MOTOR mode from the rest (menu) state and does nothing in MOTOR mode;
  ``... FD`` returns to rest from any state and zeroes the commands (``zero_commands``); ``... FE`` sets the
  mechanical zero to the present position in the rest state only (ignored in MOTOR mode).
* Any other frame is a command: 16/12/12/12/12-bit fields mapped linearly onto the configured ranges
  (P, V, KP, KD, T; ``unpack_cmd``), kept in any state and applied in MOTOR mode as
  ``tau = kp (p - theta) + kd (v - omega) + t_ff``, limited to the current limit (the T range's ends). A
  field cannot carry a value outside its range: the host clamps before packing. A command frame resets the
  CAN timeout counter; special frames do not.
* CAN timeout (``CAN_TIMEOUT``, in cycles of the 40 kHz commutation loop, 0 = none): in MOTOR mode, once
  more than that many cycles passed since the last command frame, the commands are zeroed and the motor
  stops commutating: zero torque, the shaft free, until the next command frame.

Ranges per motor model (:data:`rtctl.drivers.can.mit.MODELS`; "mini-cheetah" is the firmware's default
configuration: P +-12.5 rad, V +-65 rad/s, KP 0..500 N m/rad, KD 0..5 N m s/rad, T +-18 N m).
Not emulated: the rest-state serial menu and calibration, the firmware's 12-bit integer overflow in replies
whose value lies outside the range (the emulator clamps), and commands shorter than 8 bytes (the firmware
unpacks whatever its receive buffer holds; the emulator answers them and keeps its last command).
"""
from __future__ import annotations

import math
import time

import can
import numpy as np

from rtctl.drivers.can.mit import get_model, is_special, pack_reply, unpack_command

from .plant_clock import Faults, PlantClock

LOOP_HZ = 40_000.0       # the firmware's commutation loop (DT = 25 us)
REST, MOTOR = "rest", "motor"


class MitEmulator:
    """MIT-mode motors (one per joint, output-side values) answering on ``bus``."""

    def __init__(self, bus, plant, v_index, can_ids, motor_model="AK80-9", host_id=0, encoder_bits=14,
                 gear=9.0, drop=0.0, delay_reply=None, seed=0, can_timeout_cycles=0):
        self.bus = bus
        self.motors = [get_model(motor_model)] * len(can_ids) if isinstance(motor_model, str) else \
            [get_model(m) for m in motor_model]
        self.ids = list(can_ids)
        self.slot = {i: k for k, i in enumerate(self.ids)}
        self.host_id = host_id
        n = len(self.ids)
        self.mode = [REST] * n
        self.cmd = np.zeros((n, 5))  # p, v, kp, kd, t_ff (output side), as unpacked
        self.offset = np.zeros(n)     # zero-position offsets
        self.timeout = float(can_timeout_cycles) / LOOP_HZ   # s; 0: no timeout
        self.last_command = np.full(n, -math.inf)            # monotonic time of each motor's last command frame
        self.timed_out = np.zeros(n, dtype=bool)
        self.counted = np.zeros(n)     # the timeout counter (s) when motor mode was left: it counts in motor mode only
        self.events: list = []                               # [(time, motor id, what)]
        # Rotor encoder of encoder_bits behind a gear: the output-side position step.
        self.position_step = 2 * math.pi / (1 << encoder_bits) / gear
        self.clock = PlantClock(plant, v_index, np.ones(n), torque_fn=self._torque)
        self.faults = Faults(drop, delay_reply, seed)
        self.unknown = 0
        self.frames = 0
        self._reply = [can.Message(arbitration_id=host_id, data=bytearray(6), is_extended_id=False) for _ in self.ids]

    def _torque(self, theta, omega, out, h):
        for k, m in enumerate(self.motors):
            if self.mode[k] != MOTOR or self.timed_out[k]:
                out[k] = 0.0
                continue
            p, v, kp, kd, t = self.cmd[k]
            tau = kp * (p - (theta[k] - self.offset[k])) + kd * (v - omega[k]) + t
            out[k] = min(max(tau, m.t_min), m.t_max)

    def _check_timeouts(self, now: float) -> None:
        if not self.timeout:
            return
        for k in range(len(self.ids)):
            if self.mode[k] == MOTOR and not self.timed_out[k] and now - self.last_command[k] > self.timeout:
                self.timed_out[k] = True
                self.cmd[k] = 0.0                              # zero_commands
                self.clock.motor_torque[k] = 0.0
                self.events.append((now, self.ids[k], "CAN timeout: commands zeroed"))

    def handle(self, msg, now) -> None:
        k = self.slot.get(msg.arbitration_id)
        if k is None or msg.is_error_frame or msg.is_extended_id or msg.is_remote_frame:
            self.unknown += 1
            return
        self.frames += 1
        self._check_timeouts(now)
        self.clock.advance(now)
        theta, omega = self.clock.motor_state()
        m = self.motors[k]
        if self.faults.before_answer():                        # the answer reflects the state before the frame
            p = round((theta[k] - self.offset[k]) / self.position_step) * self.position_step
            pack_reply(m, self.ids[k], p, omega[k], self.clock.motor_torque[k], self._reply[k].data)
            self.bus.send(self._reply[k])
        special = is_special(msg.data)
        if special == 0xFC and self.mode[k] == REST:
            self.mode[k] = MOTOR
            self.last_command[k] = now - self.counted[k]
            self.events.append((now, self.ids[k], "enter motor mode"))
        elif special == 0xFD:
            if self.mode[k] == MOTOR:
                self.events.append((now, self.ids[k], "exit motor mode"))
                self.counted[k] = now - self.last_command[k]
            self.mode[k] = REST
            self.cmd[k] = 0.0
            self.clock.motor_torque[k] = 0.0
        elif special == 0xFE:
            if self.mode[k] == REST:
                self.offset[k] = theta[k]
        elif special == 0 and len(msg.data) == 8:
            self.cmd[k] = unpack_command(m, msg.data)
            self.last_command[k] = now
            self.counted[k] = 0.0
            if self.timed_out[k]:
                self.timed_out[k] = False
                self.events.append((now, self.ids[k], "command after CAN timeout"))
        if self.mode[k] == MOTOR and not self.timed_out[k]:   # the new command acts from now on
            self._torque(theta, omega, self.clock.motor_torque, 0.0)

    def poll(self, timeout: float) -> None:
        msg = self.bus.recv(timeout)
        now = time.monotonic()
        if msg is not None:
            self.handle(msg, now)
        else:                                  # the plant moves on frames (gaps beyond max_gap are not integrated)
            self._check_timeouts(now)

    def counters(self):
        return {"frames": self.frames, "dropped": self.faults.dropped, "delayed": self.faults.delayed,
                "unknown": self.unknown, "plant_steps": self.clock.steps,
                "events": [list(e) for e in self.events]}
