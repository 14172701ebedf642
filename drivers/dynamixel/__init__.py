"""Dynamixel Protocol 2.0 servos (ROBOTIS X series) over a serial port.

* :mod:`.protocol` -- the packet codec (CRC-16, byte stuffing, instruction and status packets);
* :mod:`.control_table` -- per-model control tables and units, as data;
* :mod:`.driver` -- the ``dynamixel`` backend (:class:`DynamixelDriver`).
"""
from . import control_table, protocol
from .control_table import MODELS, ServoModel
from .driver import BusError, DynamixelDriver

__all__ = ["BusError", "DynamixelDriver", "MODELS", "ServoModel", "control_table", "protocol"]
