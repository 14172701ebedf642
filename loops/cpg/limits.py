"""Therapist safety limits of the jaw-rehabilitation CPG, and the refusal raised when a request breaks them.

A therapist sets, per patient, the largest incisal opening, the largest
incisal speed, the allowed chewing-frequency range and the largest force the
robot may apply. :class:`~loops.cpg.generator.ChewingCPG` checks every
modulation request (frequency, amplitude, pattern) *before* it reaches the
oscillators: the frequency against the range, and the predicted output
envelope -- the steady cycle of the new targets and the transition the
filters will produce from the current state -- against the opening and speed
limits. A request outside them raises :class:`Refused` with the reason; the
running targets stay as they were. ``max_force`` is not used by the CPG; it
is carried here so one object holds all the therapist's limits, and the loop
passes it to the force clamp.

Defaults (:class:`TherapistLimits()`) are the healthy-adult envelope, to be
narrowed per patient:

* ``max_opening = 0.045`` m: typical maximal incisal opening of ~45 mm (the
  mandibular border-movement envelope of Posselt 1957, J Prosthet Dent
  7:375-385; value from issue 8);
* ``max_speed = 0.15`` m/s: about 1.8 times the peak opening and closing
  speeds of habitual chewing, 80.0 and 83.5 mm/s (Pasinato et al. 2017, CoDAS
  29(2):e20160074), so the shipped normal cycle runs anywhere in the default
  frequency range;
* ``min_frequency = 0.5`` Hz, ``max_frequency = 2.0`` Hz: around the 1.0-1.5
  cycles/s of natural chewing (Buschang et al. 2000, Arch Oral Biol 45:461:
  835 and 973 ms per cycle), slow enough for passive exercise;
* ``max_force = None``: not set; a force clamp given ``None`` must treat the
  force channel as disabled -- there is no population default for a patient's
  tolerable force.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["Envelope", "Refused", "TherapistLimits"]


class Refused(ValueError):
    """A modulation request outside the therapist's limits (or otherwise not executable); ``reason`` says why.

    ``field`` names the offending request field (``"frequency"``,
    ``"amplitude_scale"``, ``"pattern"``, ``"limits"``), ``value`` its value,
    and ``limit`` the limit it broke (``None`` when no numeric limit applies).
    """

    def __init__(self, reason: str, field: str | None = None, value=None, limit=None):
        super().__init__(reason)
        self.reason = reason
        self.field = field
        self.value = value
        self.limit = limit


@dataclass(frozen=True)
class Envelope:
    """Extremes of the incisal-point output: largest opening ``max(-z)`` (m), speed ``|p'|`` (m/s),
    acceleration ``|p''|`` (m/s^2) and jerk ``|p'''|`` (m/s^3)."""

    max_opening: float
    max_speed: float
    max_acceleration: float
    max_jerk: float

    def union(self, other: "Envelope") -> "Envelope":
        return Envelope(*(float(max(a, b)) for a, b in zip(self.as_tuple(), other.as_tuple())))

    def as_tuple(self) -> tuple:
        return (self.max_opening, self.max_speed, self.max_acceleration, self.max_jerk)


def _positive(name, value, *, allow_none=False):
    if value is None and allow_none:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"TherapistLimits: {name} must be a number, got {value!r}") from None
    if not math.isfinite(x) or x <= 0:
        raise ValueError(f"TherapistLimits: {name} must be finite and > 0, got {value!r}")
    return x


@dataclass(frozen=True)
class TherapistLimits:
    """Per-patient limits in SI units: ``max_opening`` (m, the largest downward incisal displacement
    from occlusion), ``max_speed`` (m/s, incisal speed ``|p'|``), ``min_frequency``/``max_frequency``
    (Hz, the allowed chewing-frequency range) and ``max_force`` (N, for the force clamp; ``None`` =
    not set). Bad values raise ``ValueError`` naming the field. Defaults: see the module docstring.
    """

    max_opening: float = 0.045
    max_speed: float = 0.15
    min_frequency: float = 0.5
    max_frequency: float = 2.0
    max_force: float | None = None

    def __post_init__(self):
        for name in ("max_opening", "max_speed", "min_frequency", "max_frequency"):
            object.__setattr__(self, name, _positive(name, getattr(self, name)))
        object.__setattr__(self, "max_force", _positive("max_force", self.max_force, allow_none=True))
        if self.min_frequency > self.max_frequency:
            raise ValueError(f"TherapistLimits: min_frequency {self.min_frequency} Hz must not exceed "
                             f"max_frequency {self.max_frequency} Hz")

    @classmethod
    def from_dict(cls, d: dict) -> "TherapistLimits":
        """From a mapping of the field names (unknown keys are refused with their names)."""
        unknown = sorted(set(d) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"TherapistLimits: unknown field(s) {unknown}; "
                             f"known: {sorted(cls.__dataclass_fields__)}")
        return cls(**d)

    def to_dict(self) -> dict:
        return asdict(self)

    def check_frequency(self, frequency) -> float:
        """``frequency`` (Hz) as a float if it lies in ``[min_frequency, max_frequency]``, else :class:`Refused`."""
        try:
            f = float(frequency)
        except (TypeError, ValueError):
            raise Refused(f"frequency must be a number in Hz, got {frequency!r}", "frequency", frequency) from None
        if not math.isfinite(f):
            raise Refused(f"frequency must be finite, got {frequency!r}", "frequency", frequency)
        if not self.min_frequency <= f <= self.max_frequency:
            raise Refused(f"frequency {f:g} Hz is outside the allowed range "
                          f"[{self.min_frequency:g}, {self.max_frequency:g}] Hz", "frequency", f,
                          (self.min_frequency, self.max_frequency))
        return f

    @staticmethod
    def check_amplitude(scale) -> np.ndarray:
        """A per-axis amplitude scale (scalar or 3 values, each finite and >= 0) as a (3,) array, else
        :class:`Refused`. Its effect on opening and speed is checked on the predicted envelope."""
        try:
            arr = np.array(scale, dtype=np.float64)
        except (TypeError, ValueError):
            raise Refused(f"amplitude_scale must be a number or 3 numbers, got {scale!r}",
                          "amplitude_scale", scale) from None
        if arr.ndim == 0:
            arr = np.full(3, float(arr))
        if arr.shape != (3,):
            raise Refused(f"amplitude_scale must be a number or 3 numbers (lateral, anterior-posterior, "
                          f"vertical), got {scale!r}", "amplitude_scale", scale)
        if not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise Refused(f"amplitude_scale values must be finite and >= 0, got {arr.tolist()}",
                          "amplitude_scale", arr.tolist())
        return arr

    def check_envelope(self, envelope: Envelope, request: str, field: str, value) -> None:
        """:class:`Refused` naming ``request`` if the predicted ``envelope`` opens or moves beyond the limits."""
        if envelope.max_opening > self.max_opening:
            raise Refused(f"{request}: the incisal opening would reach {envelope.max_opening * 1e3:.2f} mm, "
                          f"above max_opening {self.max_opening * 1e3:.2f} mm", field, value, self.max_opening)
        if envelope.max_speed > self.max_speed:
            raise Refused(f"{request}: the incisal speed would reach {envelope.max_speed * 1e3:.1f} mm/s, "
                          f"above max_speed {self.max_speed * 1e3:.1f} mm/s", field, value, self.max_speed)
