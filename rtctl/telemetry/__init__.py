"""Telemetry for the control loop: allocation-free hand-off, ZeroMQ publishing, recording and tools.

* :mod:`.schema` -- the versioned msgpack wire format (topics, fields, SI units).
* :mod:`.publisher` -- :class:`Telemetry`: the per-cycle sink, the publisher thread or process (:mod:`.relay`).
* :mod:`.recording`, :mod:`.playback`, :mod:`.recover`, :mod:`.tools` -- record (MCAP), replay, recover, echo,
  stats, plot.
* :mod:`.foxglove` -- the Foxglove WebSocket server; :mod:`.plotjuggler` -- the PlotJuggler stream's two forms.

The operator's surfaces (control channel, dashboard, their clients) are an application layer above this one:
:mod:`rtctl.operator`. The names in ``__all__`` are importable from here, each at its first use.
"""
from importlib import import_module

_LAZY = {"EndpointError": ".endpoints", "check_endpoint": ".endpoints", "Telemetry": ".publisher",
         "SCHEMA_VERSION": ".schema", "SchemaError": ".schema", "SchemaVersionError": ".schema", "decode": ".schema"}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    """PEP 562: a command that needs one telemetry module (``rtctl record``, or ``rtctl control`` reaching the
    request table through :mod:`rtctl.operator`) does not import the publisher's compiled ring."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rtctl.telemetry' has no attribute {name!r}")
    return getattr(import_module(module, __name__), name)
