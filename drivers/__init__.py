"""Hardware abstraction: actuator drivers selected by name from config.

``create_driver("sim", model, plant=..., period=...)`` -- see :mod:`drivers.base`
for the interface every backend implements.
"""
from .base import ActuatorDriver, DriverHealth, create_driver, register_driver
from .sim import SimDriver
from . import dynamixel  # noqa: F401  (registers the "dynamixel" backend)
from . import can  # noqa: F401  (registers the "can_mit" and "cia402" backends)
from .transmission import Transmission

__all__ = ["ActuatorDriver", "DriverHealth", "SimDriver", "Transmission", "create_driver", "register_driver"]
