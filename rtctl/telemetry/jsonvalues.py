"""Non-finite numbers in the JSON rtctl writes: recordings, the Foxglove server, PlotJuggler, the dashboard, echo.

JSON has no NaN or infinity (RFC 8259, section 6), yet Python's :mod:`json` writes the literals ``NaN`` and
``Infinity``, which ``JSON.parse`` (Foxglove, browsers) and strict parsers refuse: the message that carries the
values of a non-finite trip is the one that is lost. One rule for every JSON text rtctl writes:

* a non-finite float is written as ``null`` in its place, so arrays keep their indices; Foxglove's plot draws a
  gap there and PlotJuggler skips it;
* the top-level object then gets the member ``"nonfinite"``: a list of ``{"at": POINTER, "value": VALUE}``,
  POINTER the JSON Pointer (RFC 6901) of the place (``/q/3``, ``/latency``, ``/q~1joint_1``), VALUE one of
  ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (the spelling of the Protocol Buffers JSON mapping for double,
  which Python's ``float()`` and JavaScript's ``Number()`` read back). NaN and each sign of infinity stay
  distinguishable: a trip on an overflowing effort reads differently from one on 0/0;
* a JSON Schema keeps ``"type": "number"`` for such a field and says this rule in its ``description``:
  Foxglove's JSON Schema reader (``parseJsonSchema`` of its mcap-support, also Lichtblick's) takes exactly one
  type name per field and refuses the whole channel for ``"type": ["number", "null"]``.

:func:`restore` puts the values back (rtctl's readers; the dashboard page has the same in ``nonfinite.js``).
"""
from __future__ import annotations

import json
import math

NONFINITE = "nonfinite"
VALUES = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
NONFINITE_JSON_SCHEMA = {
    "type": "array",
    "description": "present when a value of this message is not finite: that value is null in its place, and "
                   "here is where (a JSON Pointer, RFC 6901) and which",
    "items": {"type": "object", "properties": {"at": {"type": "string"},
                                               "value": {"type": "string", "enum": list(VALUES)}}}}


def spell(x: float) -> str:
    """``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` for a non-finite float."""
    return "NaN" if x != x else ("Infinity" if x > 0 else "-Infinity")


def pointer_token(key: str) -> str:
    """A member name as a JSON Pointer reference token (RFC 6901, section 3: ``~`` -> ``~0``, ``/`` -> ``~1``)."""
    return key.replace("~", "~0").replace("/", "~1")


def replace_nonfinite(obj):
    """(``obj`` with its non-finite floats replaced by None, the list of ``{"at", "value"}`` found)."""
    found = []

    def walk(value, at):
        if isinstance(value, float):
            if math.isfinite(value):
                return value
            found.append({"at": at, "value": spell(value)})
            return None
        if isinstance(value, dict):
            return {k: walk(v, f"{at}/{pointer_token(str(k))}") for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v, f"{at}/{i}") for i, v in enumerate(value)]
        return value

    return walk(obj, ""), found


def dumps(obj: dict, default=None) -> str:
    """``obj`` (a dict) as JSON text under the rule: no ``NaN``/``Infinity`` literal ever."""
    try:
        return json.dumps(obj, allow_nan=False, default=default)
    except ValueError:
        clean, found = replace_nonfinite(obj)
        if not found:
            raise
        if not isinstance(clean, dict) or NONFINITE in clean:
            raise ValueError("a JSON text with non-finite values must be an object without a 'nonfinite' member")
        return json.dumps({**clean, NONFINITE: found}, allow_nan=False, default=default)


def _parent(obj, pointer: str):
    """The container holding the place ``pointer`` names, and the key or index there."""
    if not isinstance(pointer, str) or not pointer.startswith("/"):
        raise ValueError(f"'nonfinite' names {pointer!r}, not a JSON Pointer such as '/q/3'")
    tokens = [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]
    node = obj
    for depth, token in enumerate(tokens):
        key = token
        if isinstance(node, list):
            key = int(token) if token.isdigit() and int(token) < len(node) else None
        elif not isinstance(node, dict) or token not in node:
            key = None
        if key is None:
            raise ValueError(f"'nonfinite' names {pointer!r}, which is not in the message")
        if depth == len(tokens) - 1:
            if node[key] is not None:
                raise ValueError(f"'nonfinite' names {pointer!r}, which holds {node[key]!r}, not null")
            return node, key
        node = node[key]


def restore(obj):
    """Put back the values that ``obj["nonfinite"]`` lists (the member is removed); ``obj`` is returned.
    A message without it is returned as it is; a list that does not match the message is a ValueError."""
    if not isinstance(obj, dict) or NONFINITE not in obj:
        return obj
    entries = obj.pop(NONFINITE)
    if not isinstance(entries, list):
        raise ValueError(f"'nonfinite' is a JSON {type(entries).__name__}, not a list")
    for entry in entries:
        value = entry.get("value") if isinstance(entry, dict) else None
        if not isinstance(value, str) or value not in VALUES:
            raise ValueError(f"'nonfinite' entry {entry!r} is not {{\"at\": POINTER, \"value\": one of "
                             f"{list(VALUES)}}}")
        node, key = _parent(obj, entry.get("at"))
        node[key] = VALUES[value]
    return obj


def loads(text):
    """A JSON text written under the rule, its non-finite values restored."""
    return restore(json.loads(text))
