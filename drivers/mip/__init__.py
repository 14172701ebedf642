"""MicroStrain's MIP protocol (3DM-GX5 / 3DM-CV7 inertial sensors) over a serial port.

* :mod:`.protocol` -- the packet codec (framing, Fletcher-16 checksum, fields, base and 3DM commands, replies);
* :mod:`.stream` -- the compiled, allocation-free parser of the data stream;
* :mod:`.driver` -- the ``mip`` sensor backend (:class:`MipImu`).
"""
from . import protocol, stream
from .driver import DeviceError, MipImu

__all__ = ["DeviceError", "MipImu", "protocol", "stream"]
