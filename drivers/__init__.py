"""Hardware abstraction: actuator drivers selected by name from config.

``create_driver("sim", model, plant=..., period=...)`` -- see :mod:`rtctl.drivers.base`
for the interface every backend implements. Backends are found by name through
:data:`rtctl.registry.DRIVERS` (the Dynamixel and CAN backends load on first use).
"""
from .base import ActuatorDriver, DriverHealth, create_driver
from .sim import SimDriver
from .transmission import Transmission

__all__ = ["ActuatorDriver", "DriverHealth", "SimDriver", "Transmission", "create_driver"]
