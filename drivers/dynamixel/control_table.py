"""X-series control tables and unit conversions, declared as data (ROBOTIS e-manual).

A model is one entry of :data:`MODELS`: its model number (what PING returns),
its control table (name -> (address, size in bytes, signed, area, default)),
unit scales and motor constants. Supporting another X-series servo is one more
entry; nothing else in the driver or the emulator names an address.

Units (X series): position 4096 counts per revolution (0.088 deg), velocity
0.229 rev/min per unit, current 2.69 mA per unit (XM/XH; other families have
their own ``current_unit``). The torque constant is the stall torque over the
stall current of the data sheet at 12 V; the servo's own current loop makes
``torque = torque_constant * current`` the model the ``effort`` mode relies on.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

# Operating modes (address 11).
CURRENT_CONTROL = 0
VELOCITY_CONTROL = 1
POSITION_CONTROL = 3
EXTENDED_POSITION_CONTROL = 4
CURRENT_BASED_POSITION_CONTROL = 5
PWM_CONTROL = 16

EEPROM, RAM = "eeprom", "ram"

# Indirect Address n (2 bytes) holds the control-table address whose item Indirect Data n (1 byte) stands for
# (e-manual, XM430-W350 control table / Indirect Address, Indirect Data): two blocks of 28,
# (first n, address of Indirect Address n, address of Indirect Data n, count); initial value: its own data byte.
INDIRECT_BLOCKS = ((1, 168, 224, 28), (29, 578, 634, 28))
INDIRECT_TARGETS = (64, 661)     # the RAM area: "EEPROM addresses can't be assigned an Indirect Address"


def indirect_items(blocks=INDIRECT_BLOCKS) -> dict:
    """The Indirect Address and Indirect Data items of ``blocks`` in the table's (address, size, signed, area,
    default) form."""
    items = {}
    for first, address, data, count in blocks:
        for k in range(count):
            items[f"indirect_address_{first + k}"] = (address + 2 * k, 2, False, RAM, data + k)
            items[f"indirect_data_{first + k}"] = (data + k, 1, False, RAM, 0)
    return items


# name: (address, size, signed, area, default) -- the X-series layout shared by XM430/XM540/XH430.
X_SERIES_TABLE = {
    "model_number": (0, 2, False, EEPROM, None),
    "model_information": (2, 4, False, EEPROM, 0),
    "firmware_version": (6, 1, False, EEPROM, 48),
    "id": (7, 1, False, EEPROM, 1),
    "baud_rate": (8, 1, False, EEPROM, 1),
    "return_delay_time": (9, 1, False, EEPROM, 250),
    "drive_mode": (10, 1, False, EEPROM, 0),
    "operating_mode": (11, 1, False, EEPROM, POSITION_CONTROL),
    "secondary_id": (12, 1, False, EEPROM, 255),
    "protocol_type": (13, 1, False, EEPROM, 2),
    "homing_offset": (20, 4, True, EEPROM, 0),
    "moving_threshold": (24, 4, False, EEPROM, 10),
    "temperature_limit": (31, 1, False, EEPROM, 80),
    "max_voltage_limit": (32, 2, False, EEPROM, 160),
    "min_voltage_limit": (34, 2, False, EEPROM, 95),
    "pwm_limit": (36, 2, False, EEPROM, 885),
    "current_limit": (38, 2, False, EEPROM, None),
    "velocity_limit": (44, 4, False, EEPROM, None),
    "max_position_limit": (48, 4, False, EEPROM, 4095),
    "min_position_limit": (52, 4, False, EEPROM, 0),
    "startup_configuration": (60, 1, False, EEPROM, 0),
    "shutdown": (63, 1, False, EEPROM, 52),
    "torque_enable": (64, 1, False, RAM, 0),
    "led": (65, 1, False, RAM, 0),
    "status_return_level": (68, 1, False, RAM, 2),
    "registered_instruction": (69, 1, False, RAM, 0),
    "hardware_error_status": (70, 1, False, RAM, 0),
    "velocity_i_gain": (76, 2, False, RAM, 1920),
    "velocity_p_gain": (78, 2, False, RAM, 100),
    "position_d_gain": (80, 2, False, RAM, 0),
    "position_i_gain": (82, 2, False, RAM, 0),
    "position_p_gain": (84, 2, False, RAM, 800),
    "feedforward_2nd_gain": (88, 2, False, RAM, 0),
    "feedforward_1st_gain": (90, 2, False, RAM, 0),
    "bus_watchdog": (98, 1, True, RAM, 0),
    "goal_pwm": (100, 2, True, RAM, 0),
    "goal_current": (102, 2, True, RAM, 0),
    "goal_velocity": (104, 4, True, RAM, 0),
    "profile_acceleration": (108, 4, False, RAM, 0),
    "profile_velocity": (112, 4, False, RAM, 0),
    "goal_position": (116, 4, True, RAM, 2048),
    "realtime_tick": (120, 2, False, RAM, 0),
    "moving": (122, 1, False, RAM, 0),
    "moving_status": (123, 1, False, RAM, 0),
    "present_pwm": (124, 2, True, RAM, 0),
    "present_current": (126, 2, True, RAM, 0),
    "present_velocity": (128, 4, True, RAM, 0),
    "present_position": (132, 4, True, RAM, 2048),
    "velocity_trajectory": (136, 4, True, RAM, 0),
    "position_trajectory": (140, 4, True, RAM, 0),
    "present_input_voltage": (144, 2, False, RAM, 120),
    "present_temperature": (146, 1, False, RAM, 30),
    **indirect_items(),
}

# Value range of writable items (e-manual, XM430-W350 control table): a value outside is a Data Range Error.
# (low, high) inclusive, or a tuple of the allowed values. Items not named here accept any value of their size.
X_SERIES_RANGES = {
    "id": (0, 252), "baud_rate": (0, 7), "return_delay_time": (0, 254),
    "operating_mode": (CURRENT_CONTROL, VELOCITY_CONTROL, POSITION_CONTROL, EXTENDED_POSITION_CONTROL,
                       CURRENT_BASED_POSITION_CONTROL, PWM_CONTROL),
    "protocol_type": (1, 2), "homing_offset": (-1_044_479, 1_044_479), "moving_threshold": (0, 1023),
    "temperature_limit": (0, 100), "max_voltage_limit": (95, 160), "min_voltage_limit": (95, 160),
    "pwm_limit": (0, 885), "current_limit": (0, 1193), "velocity_limit": (0, 1023),
    "max_position_limit": (0, 4095), "min_position_limit": (0, 4095),
    "torque_enable": (0, 1), "led": (0, 1), "status_return_level": (0, 2),
    "velocity_i_gain": (0, 16383), "velocity_p_gain": (0, 16383), "position_d_gain": (0, 16383),
    "position_i_gain": (0, 16383), "position_p_gain": (0, 16383), "feedforward_2nd_gain": (0, 16383),
    "feedforward_1st_gain": (0, 16383), "bus_watchdog": (0, 127), "profile_acceleration": (0, 32767),
    "profile_velocity": (0, 32767), "goal_position": (-1_048_575, 1_048_575),
    **{name: INDIRECT_TARGETS for name in indirect_items() if name.startswith("indirect_address_")},
}
# Goal items bounded by configured limit items: a value outside is a Data Limit Error.
# name: (low limit item or None for -high, high limit item); goal_position only in position control mode.
X_SERIES_LIMITS = {
    "goal_pwm": (None, "pwm_limit"), "goal_current": (None, "current_limit"),
    "goal_velocity": (None, "velocity_limit"), "goal_position": ("min_position_limit", "max_position_limit"),
}
GOAL_ITEMS = ("goal_pwm", "goal_current", "goal_velocity", "goal_position")
BAUD_RATES = {0: 9600, 1: 57600, 2: 115200, 3: 1_000_000, 4: 2_000_000, 5: 3_000_000, 6: 4_000_000,
              7: 4_500_000}

MODELS = {
    "XM430-W350": {
        "model_number": 1020,
        "table": X_SERIES_TABLE,
        "defaults": {"current_limit": 1193, "velocity_limit": 200},
        "position_counts": 4096, "position_center": 2048,
        "velocity_unit_rpm": 0.229, "current_unit": 2.69e-3,
        "stall_torque": 4.1, "stall_current": 2.3, "no_load_speed_rpm": 46.0,
    },
    "XM430-W210": {
        "model_number": 1030,
        "table": X_SERIES_TABLE,
        "defaults": {"current_limit": 1193, "velocity_limit": 330},
        "position_counts": 4096, "position_center": 2048,
        "velocity_unit_rpm": 0.229, "current_unit": 2.69e-3,
        "stall_torque": 3.0, "stall_current": 2.3, "no_load_speed_rpm": 77.0,
    },
    "XH430-W350": {
        "model_number": 1010,
        "table": X_SERIES_TABLE,
        "defaults": {"current_limit": 648, "velocity_limit": 210},
        "position_counts": 4096, "position_center": 2048,
        "velocity_unit_rpm": 0.229, "current_unit": 2.69e-3,
        "stall_torque": 3.4, "stall_current": 1.3, "no_load_speed_rpm": 46.0,
    },
    "XM540-W270": {
        "model_number": 1120,
        "table": X_SERIES_TABLE,
        "defaults": {"current_limit": 2047, "velocity_limit": 128},
        "position_counts": 4096, "position_center": 2048,
        "velocity_unit_rpm": 0.229, "current_unit": 2.69e-3,
        "stall_torque": 10.6, "stall_current": 4.4, "no_load_speed_rpm": 30.0,
    },
}


@dataclass(frozen=True)
class Field:
    name: str
    address: int
    size: int
    signed: bool
    area: str
    default: int


class ServoModel:
    """One model's table and conversions between register units and SI (servo output shaft)."""

    def __init__(self, name: str):
        if name not in MODELS:
            raise ValueError(f"unknown Dynamixel model {name!r}; known: {sorted(MODELS)}")
        spec = MODELS[name]
        self.name = name
        self.model_number = int(spec["model_number"])
        defaults = dict(spec.get("defaults", {}), model_number=self.model_number)
        self.fields = {k: Field(k, a, s, sg, area, defaults.get(k, d))
                       for k, (a, s, sg, area, d) in spec["table"].items()}
        self.position_counts = int(spec["position_counts"])
        self.position_center = int(spec["position_center"])
        self.rad_per_count = 2 * math.pi / self.position_counts
        self.rad_s_per_unit = spec["velocity_unit_rpm"] * 2 * math.pi / 60.0
        self.amp_per_unit = float(spec["current_unit"])
        self.stall_torque = float(spec["stall_torque"])
        self.torque_constant = spec["stall_torque"] / spec["stall_current"]   # N m / A
        self.no_load_speed = spec["no_load_speed_rpm"] * 2 * math.pi / 60.0   # rad/s
        self.current_limit = int(self.fields["current_limit"].default)
        self.table_size = max(f.address + f.size for f in self.fields.values())
        self.ranges = dict(spec.get("ranges", X_SERIES_RANGES))
        if "current_limit" in self.ranges:
            self.ranges["current_limit"] = (0, self.current_limit)
        self.limits = dict(spec.get("limits", X_SERIES_LIMITS))
        self.seconds_per_watchdog_unit = 0.02
        blocks = spec.get("indirect", INDIRECT_BLOCKS)
        # address of each Indirect Data byte -> address of the Indirect Address item naming its target
        self.indirect = {data + k: address + 2 * k for _n, address, data, count in blocks for k in range(count)}
        pointers = set(self.indirect.values())
        # writable only with torque off: the EEPROM area and the Indirect Addresses (ROBOTIS' indirect-address
        # example: "Indirect address would not accessible when the torque is already enabled")
        self.torque_locked = frozenset(f.name for f in self.fields.values()
                                       if f.area == EEPROM or f.address in pointers)

    def __getitem__(self, name: str) -> Field:
        return self.fields[name]

    def field_at(self, address: int) -> Field | None:
        for f in self.fields.values():
            if f.address == address:
                return f
        return None

    def span(self, first: str, last: str) -> tuple[int, int]:
        """(address, length) of the contiguous block from field ``first`` through field ``last``."""
        a, b = self.fields[first], self.fields[last]
        return a.address, b.address + b.size - a.address

    # conversions (servo output shaft, SI)
    def counts_to_rad(self, counts: int) -> float:
        return (counts - self.position_center) * self.rad_per_count

    def rad_to_counts(self, rad: float) -> int:
        return int(round(rad / self.rad_per_count)) + self.position_center

    def units_to_rad_s(self, units: int) -> float:
        return units * self.rad_s_per_unit

    def units_to_amp(self, units: int) -> float:
        return units * self.amp_per_unit


def servo_model(name: str) -> ServoModel:
    return ServoModel(name)


def model_by_number(number: int) -> str | None:
    for name, spec in MODELS.items():
        if spec["model_number"] == number:
            return name
    return None
