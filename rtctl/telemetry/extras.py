"""The stream's ``extra`` field: what the loop's components add to each sample."""
from __future__ import annotations

import numpy as np

from ..rt.hooks import TelemetrySource
from .scene import configuration_sources


def gather_extras(loop):
    """``(names, units, extra, parts)`` of the ``extra`` field: the ``telemetry_fields`` / ``telemetry_values``
    of the controller, then of each loop hook that has them (e.g. the collision monitor), of each sensor, of
    the estimator with the base's truth beside it, and the whole configuration where the controller does not
    command all of it (:func:`~.scene.configuration_sources`), in that order. One provider's array is handed
    off as it is (``parts`` empty); several are gathered each cycle into the preallocated ``extra``, each
    ``(destination view, source array)`` of ``parts`` copied."""
    truth = (loop.base_truth,) if loop.estimator is not None else ()   # beside the estimate, to compare
    providers = [p for p in (loop.controller, *loop.hooks, *loop.sensors, loop.estimator, *truth,
                             *configuration_sources(loop))
                 if isinstance(p, TelemetrySource) and p.telemetry_fields]
    names, units, parts, start = [], [], [], 0
    for p in providers:
        fields, values = list(p.telemetry_fields), p.telemetry_values
        if not isinstance(values, np.ndarray) or values.shape != (len(fields),):
            raise ValueError(f"{type(p).__name__}: telemetry_values must be an array matching its "
                             f"{len(fields)} telemetry_fields")
        names += fields
        stated = list(p.telemetry_units)
        units += stated if len(stated) == len(fields) else [""] * len(fields)
        parts.append((slice(start, start + len(fields)), values))
        start += len(fields)
    if len(parts) == 1:
        return names, units, parts[0][1], ()
    extra = np.zeros(start)
    return names, units, extra, tuple((extra[s], values) for s, values in parts)
