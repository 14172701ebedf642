"""Telemetry for the control loop: allocation-free hand-off, ZeroMQ publishing, the control channel, tools.

* :mod:`.schema` -- the versioned msgpack wire format (topics, fields, SI units).
* :mod:`.publisher` -- :class:`Telemetry`: the per-cycle sink and the publisher thread.
* :mod:`.control` -- :class:`ControlServer`: validated run-time commands applied at cycle boundaries.
* :mod:`.tools` -- echo, stats, record (MCAP), replay, plot.
* :mod:`.dashboard` -- the browser dashboard (websocket bridge + static page).
"""
from .control import ControlServer, Refused, request
from .endpoints import EndpointError, check_endpoint
from .publisher import Telemetry
from .schema import SCHEMA_VERSION, SchemaError, SchemaVersionError, decode

__all__ = ["SCHEMA_VERSION", "ControlServer", "EndpointError", "Refused", "SchemaError", "SchemaVersionError",
           "Telemetry", "check_endpoint", "decode", "request"]
