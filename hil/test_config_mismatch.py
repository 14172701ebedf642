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

import pytest

from rtctl.drivers import create_driver
from rtctl.drivers.dynamixel.driver import BusError
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


def test_a_servo_silent_at_every_rate_is_said_so():
    with EmulatorProcess("--ids", "3,4") as emu:          # nobody is servo 1
        message = configure_error(emu.port, 57600)
    assert "no reply from servo 1" in message and "answers at none of the X-series rates" in message, message
