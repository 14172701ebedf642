"""An emulated CiA 402 servo drive on the CiA 301 device of :mod:`rtctl.hil.canopen_device`.

CiA 402-2 behaviour, by section of the profile (IEC 61800-7-201 numbering in brackets where it differs):

* Drive state machine (6.3, figure "Finite state automaton", table "Transition events and actions"):
  NOT READY TO SWITCH ON -> SWITCH ON DISABLED at power-on (transitions 0, 1); controlword commands
  shutdown ``0xxx x110`` (2, 6, 8), switch on ``0xxx 0111`` (3, 5), enable operation ``0xxx 1111`` (4, and 3+4
  from READY TO SWITCH ON; 16 from QUICK STOP ACTIVE only with quick stop option codes 5-8), disable voltage
  ``0xxx xx0x`` (7, 9, 10, 12), quick stop ``0xxx x01x`` (7, 10, 11); fault reset on the rising edge of bit 7
  (15, FAULT -> SWITCH ON DISABLED; a held bit 7 is no command). A fault enters FAULT REACTION ACTIVE (13)
  with an EMCY, runs the reaction of the fault reaction option code 0x605E and then enters FAULT (14).
* Quick stop option code 0x605A: 0 power off at once -> SWITCH ON DISABLED; 1/2 slow down on the profile
  deceleration 0x6084 / quick stop deceleration 0x6085, 3/4 on the torque limit, then SWITCH ON DISABLED;
  5-8 the same ramps, staying in QUICK STOP ACTIVE. Fault reaction option code 0x605E: 0 power off, 1/2
  ramps as above, 3/4 torque limit. Abort connection option code 0x6007 (heartbeat event, NMT stopped, reset
  communication): 0 nothing, 1 fault (error code 0x8130 for a heartbeat event, 0x8100 otherwise), 2 disable
  voltage, 3 quick stop.
* Statusword 0x6041 (6.2): state bits 0-3, 5, 6; bit 4 voltage enabled; bit 9 remote; bit 11 internal limit
  active (a demand limited by 0x6072 or 0x607D); bit 12 "drive follows the command value" in the cyclic modes.
* Modes of operation 0x6060/0x6061 (6.4): cyclic synchronous position (8), velocity (9) and torque (10), as
  0x6502 says; any other value is refused with abort 0x06090030 (an RPDO carrying one is not taken).
* Torque offset 0x60B2 (6.4, the cyclic synchronous modes' feed-forward): added to the torque the mode makes,
  in per mille of the rated torque.
* Software position limit 0x607D (sub 1 min, sub 2 max; a max below the min is refused with 0x06090036): a
  CSP target is clamped into them; in CSV and CST a demand pushing beyond a limit the motor is at is replaced
  by holding still (the profile leaves this to the manufacturer; this is the emulated drive's choice).
* Max torque 0x6072 (per mille of the rated torque 0x6076) bounds every torque the drive makes, ramps
  included; its range ends at the power stage's peak (objects.PEAK_TORQUE_PERMILLE).

Units: position in encoder increments of the motor shaft (0x608F), velocity in increments/s, deceleration in
increments/s^2, torque in per mille of the rated torque.
"""
from __future__ import annotations

import math

from canopen.sdo import SdoAbortedError

from rtctl.drivers.can import objects as ob

from .canopen_device import MAX_BELOW_MIN, OPERATIONAL, STOPPED, VALUE_RANGE, CanopenDevice

NRTSO, SOD, RTSO, SO, OE = "NOT READY TO SWITCH ON", "SWITCH ON DISABLED", "READY TO SWITCH ON", "SWITCHED ON", \
    "OPERATION ENABLED"
QSA, FRA, FAULT = "QUICK STOP ACTIVE", "FAULT REACTION ACTIVE", "FAULT"
STATE_BITS = {NRTSO: 0x00, SOD: 0x40, RTSO: 0x31, SO: 0x33, OE: 0x37, QSA: 0x17, FRA: 0x1F, FAULT: 0x08}
POWERED = (OE, QSA, FRA)
STOPPED_SPEED = 0.3           # rad/s at the motor: a ramp has stopped the motor below this
SETTLE_TIME = 0.05            # s after the ramp's demand reached zero: stopped even if a load still pulls
# The drive's cascade, tuned to its load as a drive's commissioning does (Ellis, "Control System Design Guide",
# 4th ed. 2012, ch. 17, the cascaded position-velocity loop): a PI velocity loop of proportional gain J * w_v on
# the load inertia J at the motor, its integral's corner a fifth of w_v, and the position loop's gain (CSP) a
# fifth again. w_v = 300 rad/s keeps the loop stable at the plant's 0.5 ms sub-steps (h w_v = 0.15) down to a
# seventh of the tuned inertia.
VELOCITY_BANDWIDTH = 300.0    # rad/s
VELOCITY_INTEGRAL = 60.0      # 1/s
POSITION_GAIN = 60.0          # 1/s: velocity demand per position error


class Cia402Drive(CanopenDevice):
    """One drive: the state machine, the modes and the torque it makes (``torque(theta, omega, h)``)."""

    def __init__(self, node_id, od, send, now, on_fault=None, load_inertia=1e-4):
        self.load_inertia = float(load_inertia)      # kg m^2 at the motor, what the velocity loop is tuned to
        self.state = None
        self.on_fault = on_fault
        self.sync_count = 0
        self.fault_at_sync = None
        self.fault_events = 0
        self.states: list = []               # [(time, state)]
        super().__init__(node_id, od, send, now)
        self.increments = self.values[(ob.ENCODER_RESOLUTION, 1)] / self.values[(ob.ENCODER_RESOLUTION, 2)]
        self.rated_nm = self.values[(ob.RATED_TORQUE, 0)] / 1000.0
        self._power_on(now)

    def _power_on(self, now):
        self.position = self.velocity = self.torque_actual = 0
        self.error_code = 0
        self.controlword = 0
        self.limit_active = False
        self.applied = 0.0                   # N m at the motor
        self.integral = 0.0                  # N m: the velocity loop's integral action
        self.ramp = None    # [kind "quick stop" | "fault", deceleration rad/s^2 or None, v_ref, time v_ref hit 0]
        self._set_state(NRTSO, now)
        self._set_state(SOD, now)

    def _set_state(self, state, now):
        if state != self.state:
            self.state = state
            self.states.append((now, state))
            self.log.append((now, state))

    # -- objects -------------------------------------------------------------------------------
    def statusword(self) -> int:
        sw = STATE_BITS[self.state] | 0x0200
        if self.limit_active:
            sw |= 0x0800
        if self.state == OE and self.values[(ob.MODES_OF_OPERATION, 0)] in ob.SUPPORTED_MODE_BIT:
            sw |= 0x1000
        return sw

    def live(self, index, subindex):
        if index == ob.STATUSWORD:
            return self.statusword()
        return {ob.POSITION_ACTUAL: self.position, ob.VELOCITY_ACTUAL: self.velocity,
                ob.TORQUE_ACTUAL: self.torque_actual, ob.ERROR_CODE: self.error_code,
                ob.MODES_DISPLAY: self.values[(ob.MODES_OF_OPERATION, 0)]}.get(index)

    def check_application(self, index, subindex, value):
        if index == ob.MODES_OF_OPERATION and value != 0 and value not in ob.SUPPORTED_MODE_BIT:
            raise SdoAbortedError(VALUE_RANGE)
        if index == ob.SOFTWARE_POSITION_LIMIT and subindex in (1, 2):
            low = value if subindex == 1 else self.values[(index, 1)]
            high = value if subindex == 2 else self.values[(index, 2)]
            if high < low:
                raise SdoAbortedError(MAX_BELOW_MIN)

    def on_written(self, index, subindex, value):
        if index == ob.CONTROLWORD:
            self.on_controlword(int(value), self.now)
        elif index == ob.FAULT_INJECTION and value:
            self.enter_fault(int(value), self.now)

    # -- state machine -------------------------------------------------------------------------
    def on_controlword(self, cw: int, now: float) -> None:
        prev, self.controlword = self.controlword, cw
        s = self.state
        if cw & 0x80:
            if not prev & 0x80 and s == FAULT:                        # 15: fault reset
                self.error_code = 0
                self._set_state(SOD, now)
                self.emcy(0)
            return
        if s in (FAULT, FRA, NRTSO):
            return
        if not cw & 0x02:                                             # disable voltage: 7, 9, 10, 12
            if s != SOD:
                self._power_off(SOD, now)
        elif cw & 0x06 == 0x02:                                       # quick stop: 7, 10, 11
            if s in (RTSO, SO):
                self._set_state(SOD, now)
            elif s == OE:
                self.quick_stop(now)
        elif cw & 0x07 == 0x06:                                       # shutdown: 2, 6, 8
            if s in (SOD, SO, OE):
                self._power_off(RTSO, now)
        elif cw & 0x0F == 0x07:                                       # switch on: 3, 5
            if s == RTSO:
                self._set_state(SO, now)
            elif s == OE:
                self._power_off(SO, now)
        elif cw & 0x0F == 0x0F:                                       # enable operation: 4, 3+4, 16
            if s in (RTSO, SO) or (s == QSA and self.values[(ob.QUICK_STOP_OPTION, 0)] >= 5):
                if s == RTSO:
                    self._set_state(SO, now)
                self.ramp = None
                self._set_state(OE, now)

    def _power_off(self, state, now):
        self.ramp = None
        self.applied = 0.0
        self._set_state(state, now)

    def _deceleration(self, option):
        """Ramp deceleration (rad/s^2 at the motor) of a quick stop / fault reaction option; None: torque limit."""
        if option in (1, 5):
            return self.values[(ob.PROFILE_DECELERATION, 0)] * 2 * math.pi / self.increments
        if option in (2, 6):
            return self.values[(ob.QUICK_STOP_DECELERATION, 0)] * 2 * math.pi / self.increments
        return None

    def quick_stop(self, now):
        """Transition 11 and the reaction of 0x605A."""
        option = self.values[(ob.QUICK_STOP_OPTION, 0)]
        if option == 0:
            self._set_state(QSA, now)
            self._power_off(SOD, now)
            return
        self.ramp = ["quick stop", self._deceleration(option), None, None]
        self._set_state(QSA, now)

    def enter_fault(self, code: int, now: float) -> None:
        """Transition 13: FAULT REACTION ACTIVE with an EMCY, the 0x605E reaction, then FAULT (14)."""
        if self.state in (FAULT, FRA):
            return
        self.fault_events += 1
        self.error_code = code
        self.emcy(code, {2: 0x02, 3: 0x04, 4: 0x08, 8: 0x10}.get(code >> 12, 0x80))
        powered = self.state in POWERED
        self._set_state(FRA, now)
        option = self.values[(ob.FAULT_REACTION_OPTION, 0)]
        if option == 0 or not powered:
            self._power_off(FAULT, now)
        else:
            self.ramp = ["fault", self._deceleration(option), None, None]
        if self.on_fault is not None:
            self.on_fault(self, code)

    def abort_connection(self, code: int, now: float) -> None:
        """The reaction of 0x6007 to a lost connection (only while OPERATION ENABLED)."""
        option = self.values[(ob.ABORT_CONNECTION, 0)]
        if self.state != OE or option == 0:
            return
        self.log.append((now, f"abort connection option {option}"))
        if option == 1:
            self.enter_fault(code, now)
        elif option == 2:
            self._power_off(SOD, now)
        elif option == 3:
            self.quick_stop(now)

    def on_sync(self, now):
        if self.nmt == OPERATIONAL:
            self.sync_count += 1
            if self.sync_count == self.fault_at_sync:
                self.enter_fault(0x2310, now)

    def on_heartbeat_lost(self, node, now):
        self.abort_connection(0x8130, now)

    def on_nmt(self, old, new, now):
        if old == OPERATIONAL and new == STOPPED:
            self.abort_connection(0x8100, now)

    def on_reset(self, application, now):
        if application:
            self._power_off(SOD, now)
            self._power_on(now)
        else:
            self.abort_connection(0x8100, now)

    # -- the power stage -----------------------------------------------------------------------
    def tick(self, now):
        wake = super().tick(now)
        ramp = self.ramp
        if ramp is not None and ramp[2] == 0.0:
            ramp[3] = now if ramp[3] is None else ramp[3]
        if ramp is not None and ramp[3] is not None and (
                abs(self.velocity) * 2 * math.pi / self.increments < STOPPED_SPEED or now - ramp[3] > SETTLE_TIME):
            kind = ramp[0]
            if kind == "fault":
                self._power_off(FAULT, now)
            elif self.values[(ob.QUICK_STOP_OPTION, 0)] <= 4:
                self._power_off(SOD, now)
        return min(wake, now + 0.005) if self.ramp is not None else wake

    def measure(self, theta: float, omega: float) -> None:
        """The sampled actual values (motor shaft) in device units."""
        self.position = int(round(theta * self.increments / (2 * math.pi)))
        self.velocity = int(round(omega * self.increments / (2 * math.pi)))
        self.torque_actual = int(round(self.applied / self.rated_nm * 1000.0))

    def torque(self, theta: float, omega: float, h: float) -> float:
        """N m at the motor for the next ``h`` seconds (called per integration sub-step)."""
        limit = self.values[(ob.MAX_TORQUE, 0)] * self.rated_nm / 1000.0
        self.limit_active = False
        error = None                          # the velocity loop's, where it runs
        if self.ramp is not None:
            kind, decel, v_ref, _zero_at = self.ramp
            v_ref = omega if v_ref is None else v_ref
            v_ref = 0.0 if decel is None else math.copysign(max(abs(v_ref) - decel * h, 0.0), v_ref)
            self.ramp[2] = v_ref
            error = v_ref - omega
        elif self.state == OE:
            tau, error = self._mode_demand(theta, omega)
        else:
            tau = 0.0
        if error is not None:
            tau = self.load_inertia * VELOCITY_BANDWIDTH * error + self.integral
        if self.ramp is None and self.state == OE:
            tau += self.values[(ob.TORQUE_OFFSET, 0)] * self.rated_nm / 1000.0
        if abs(tau) > limit:
            tau = math.copysign(limit, tau)
            self.limit_active = True
        if error is None:
            self.integral = 0.0
        elif not self.limit_active:           # no integration while saturated (anti-windup)
            self.integral += self.load_inertia * VELOCITY_BANDWIDTH * VELOCITY_INTEGRAL * error * h
        self.applied = tau
        return tau

    def _mode_demand(self, theta, omega):
        """(torque, None) of cyclic synchronous torque, or (None, velocity error) for the velocity loop of the
        position and velocity modes."""
        mode = self.values[(ob.MODES_OF_OPERATION, 0)]
        scale = 2 * math.pi / self.increments
        low, high = self.values[(ob.SOFTWARE_POSITION_LIMIT, 1)] * scale, \
            self.values[(ob.SOFTWARE_POSITION_LIMIT, 2)] * scale
        if mode == ob.CSP:
            target = self.values[(ob.TARGET_POSITION, 0)] * scale
            if not low <= target <= high:
                target = min(max(target, low), high)
                self.limit_active = True
            return None, POSITION_GAIN * (target - theta) - omega
        if mode == ob.CSV:
            demand = self.values[(ob.TARGET_VELOCITY, 0)] * scale
            result = None, demand - omega
        elif mode == ob.CST:
            demand = tau = self.values[(ob.TARGET_TORQUE, 0)] * self.rated_nm / 1000.0
            result = tau, None
        else:
            return 0.0, None
        if (theta >= high and demand > 0) or (theta <= low and demand < 0):
            self.limit_active = True
            return None, -omega                                        # hold still at the limit
        return result
