"""The operator's surfaces, an application layer above the real-time core: the control channel
(:mod:`.control`: validated run-time commands applied at cycle boundaries; :mod:`.commands`, :mod:`.requests`,
:mod:`.auth`, :mod:`.handshake`, :mod:`.channel`) served by the operator process outside the loop's process
(:mod:`.process`, :mod:`.server`, :mod:`.inbox`), its client (:mod:`.client`), the browser dashboard
(:mod:`.dashboard`), their commands (:mod:`.cli`) and the wiring of a config's surfaces (:mod:`.wiring`).

``ControlServer``, ``Refused`` and ``request`` are imported on first use: ``rtctl control estop`` loads only the
client.
"""
import importlib

_EXPORTS = {"ControlServer": ".control", "Refused": ".requests", "ServerNotTrusted": ".client",
            "request": ".client"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
