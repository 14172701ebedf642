"""A config that disagrees with the actuators is refused at configure in one line naming the disagreement.

* Dynamixel: a servo answers only at its Baud Rate (ROBOTIS e-manual, X-series control table, Baud Rate,
  address 8: 9600 bps to 4.5 Mbps, factory 57600). A driver at 4 Mbps facing factory servos got "no reply";
  it now names the rate it used and the rate the servo answers at, and stays at its own.
* CiA 402: the drive declares its gear ratio (CiA 402-2, object 0x6091 "Gear ratio" of the factor group:
  sub 1 motor revolutions, sub 2 shaft revolutions), read by SDO at configure. A config whose ``gear_ratio``
  disagrees (the CiA 402 emulator's default ``--ratio 10`` against ``gear_ratio = 1.0``) ran with torques
  10x off and diverged; it is now refused naming the node, the object and both values.
"""
from __future__ import annotations

import math
import threading
import time
import uuid

import can
import canopen
import numpy as np
import pytest

from rtctl.drivers import create_driver
from rtctl.drivers.can.cia402 import Cia402Driver
from rtctl.drivers.can.objects import ENCODER_RESOLUTION, GEAR_RATIO, drive_object_dictionary
from rtctl.drivers.dynamixel.driver import BusError
from rtctl.drivers.transmission import Transmission
from rtctl.hil.can_emulator import Cia402Emulator, run_in_thread
from rtctl.hil.can_robot import build_arm2, make_plant
from rtctl.hil.dynamixel_emulator import EmulatorProcess, hil_arm


def configure_error(port, baudrate) -> str:
    driver = create_driver("dynamixel", hil_arm(2), port=port, baudrate=baudrate)
    try:
        with pytest.raises(BusError) as exc:
            driver.configure()
        assert driver._ser.baudrate == baudrate          # named, not switched to
    finally:
        driver.close()
    return str(exc.value)


@pytest.mark.parametrize("servos, master", [(57600, 4_000_000), (4_500_000, 57600)],
                         ids=["factory-servos-4Mbps-master", "4.5Mbps-servos-factory-master"])
@pytest.mark.slow
def test_a_servo_at_another_baud_rate_is_named_with_its_rate(servos, master):
    with EmulatorProcess("--baudrate", str(servos)) as emu:
        message = configure_error(emu.port, master)
        driver = create_driver("dynamixel", hil_arm(2), port=emu.port, baudrate=servos)
        try:
            driver.configure()                           # the named rate is the one that works
        finally:
            driver.close()
    assert "\n" not in message, message
    assert f"no reply from servo 1 within 20 ms on {emu.port} at {master} bps after 3 attempts" in message, message
    assert message.endswith(f"servo 1 answers at {servos} bps: set [driver] baudrate = {servos}, or the servo's "
                            f"Baud Rate (address 8) to {master} bps"), message


@pytest.mark.slow
def test_a_servo_silent_at_every_rate_is_said_so():
    with EmulatorProcess("--ids", "3,4") as emu:          # nobody is servo 1
        message = configure_error(emu.port, 57600)
    assert "no reply from servo 1" in message and "answers at none of the X-series rates" in message, message


class Drives:
    """Two emulated CiA 402 drives of gear ``ratio`` on the arm, served from a thread on a virtual bus."""

    def __init__(self, ratio):
        self.channel = f"gear-{uuid.uuid4().hex}"
        self.plant = make_plant(build_arm2())
        self.plant.reset(np.array([0.3, -0.2]))
        self.bus = can.Bus(interface="virtual", channel=self.channel)
        self.emu = Cia402Emulator(self.bus, self.plant, np.array([0, 1]), [1, 2], ratio=ratio)
        self.stop = threading.Event()
        self.thread = run_in_thread(self.emu, self.stop, 0.002)

    def close(self):
        self.stop.set()
        self.thread.join(2.0)
        self.bus.shutdown()


@pytest.mark.parametrize("ratio, declared", [(10.0, (10, 1)), (2.5, (5, 2)), (353.5, (707, 2))])
@pytest.mark.slow
def test_the_emulated_drive_declares_the_gear_ratio_its_plant_has(ratio, declared):
    """CiA 402-2 0x6091 Gear ratio: sub 1 motor revolutions per sub 2 shaft revolutions; 0x6064 counts
    0x608F:1 increments per 0x608F:2 motor revolutions. Read by SDO, 0x6091 is --ratio, and the position the
    drive measures is the joint angle times that ratio in motor increments."""
    drives = Drives(ratio)
    net = canopen.Network()
    net.connect(interface="virtual", channel=drives.channel)
    try:
        node = net.add_node(1, drive_object_dictionary())
        node.sdo.RESPONSE_TIMEOUT = 1.0
        assert (node.sdo[GEAR_RATIO][1].raw, node.sdo[GEAR_RATIO][2].raw) == declared
        increments, revolutions = node.sdo[ENCODER_RESOLUTION][1].raw, node.sdo[ENCODER_RESOLUTION][2].raw
    finally:
        net.disconnect()
        drives.close()
    emu, q = drives.emu, drives.plant.q
    emu._sample(time.monotonic(), frame=True)          # a SYNC: the drives sample the plant
    motor_turns = emu.drives[0].position / increments * revolutions
    assert motor_turns == pytest.approx(declared[0] / declared[1] * q[0] / (2 * math.pi), abs=1.0 / increments)


def cia402_driver(channel, gear_ratio):
    options = Cia402Driver.Options(can_ids=[1, 2], can_interface="virtual", can_channel=channel)
    return Cia402Driver(build_arm2(), options,
                        transmission=Transmission(2, ratio=gear_ratio), activate_timeout=2.0)


def test_a_config_gear_ratio_the_drives_do_not_have_is_refused_naming_both():
    """The README's CAN snippet said gear_ratio = 1.0 and the emulator's default drive is geared 10:1: the run
    diverged at 10x the torque. Configure now refuses it in one line, before any drive is powered."""
    drives = Drives(10.0)
    try:
        wrong = cia402_driver(drives.channel, 1.0)
        try:
            with pytest.raises(ValueError) as exc:
                wrong.configure()
        finally:
            wrong.close()
        assert all(d.state == "SWITCH ON DISABLED" for d in drives.emu.drives)
        right = cia402_driver(drives.channel, 10.0)
        try:
            right.configure()
        finally:
            right.close()
    finally:
        drives.close()
    message = str(exc.value)
    assert message == ("driver[cia402]: node 1: the drive's gear ratio 0x6091 is 10:1 (motor:shaft revolutions, "
                       "10), the config's [driver] gear_ratio is 1: make them agree"), message
