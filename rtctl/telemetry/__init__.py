"""Telemetry for the control loop: allocation-free hand-off, ZeroMQ publishing, recording and tools.

* :mod:`.schema` -- the versioned msgpack wire format (topics, fields, SI units).
* :mod:`.publisher` -- :class:`Telemetry`: the per-cycle sink, the publisher thread or process (:mod:`.relay`).
* :mod:`.recording`, :mod:`.playback`, :mod:`.recover`, :mod:`.tools` -- record (MCAP), replay, recover, echo,
  stats, plot.
* :mod:`.foxglove` -- the Foxglove WebSocket server.

The operator's surfaces (control channel, dashboard, their clients) are an application layer above this one:
:mod:`rtctl.operator`.
"""
from .endpoints import EndpointError, check_endpoint
from .publisher import Telemetry
from .schema import SCHEMA_VERSION, SchemaError, SchemaVersionError, decode

__all__ = ["SCHEMA_VERSION", "EndpointError", "SchemaError", "SchemaVersionError", "Telemetry", "check_endpoint",
           "decode"]
