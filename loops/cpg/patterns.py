"""Chewing patterns: Fourier series of the incisal point, the shipped reference cycles, and their files.

A :class:`ChewingPattern` is one chewing cycle of the incisal point as a
displacement from occlusion (the intercuspal position), in m, per axis
``j`` = 0 lateral x (positive towards the working side), 1 anterior-posterior
y (positive anterior), 2 vertical z (positive up; opening is negative z)::

    P_j(psi) = a_j0 + sum_{k=1..K} a_jk cos(k psi) + b_jk sin(k psi)

over the cycle phase ``psi`` (rad), played at the pattern's nominal
``frequency`` (Hz). Phase origin: ``psi = 0`` where the fundamental of the
vertical axis is highest (``b_z1 = 0``, ``a_z1 > 0``), i.e. on the closed
side of the cycle, so that patterns blended coefficient by coefficient are
aligned at occlusion.

File format (JSON, one pattern per file, SI units)::

    {"format": "rtctl-cpg-pattern", "version": 1, "name": str, "description": str,
     "frequency_hz": float > 0, "n_harmonics": K (1..32),
     "cos": [[a_j0 .. a_jK] for j in x, y, z],    # m
     "sin": [[b_j0 .. b_jK] for j in x, y, z],    # m, b_j0 = 0
     "reference": [[x, y, z], ...] or null,       # optional: the cycle learned from, at psi = 2 pi i / N
     "sources": [str, ...], "metadata": {...}}

:func:`load_pattern` refuses a malformed file with :class:`PatternFileError`
naming the file and the field.

Shipped reference cycles (``loops/cpg/data/<name>.json``, :func:`shipped_patterns`):
``normal``, ``hard_food``, ``lateral_grinding``. Each is the smooth closed
curve :func:`teardrop_cycle` with the excursions and frequency of
:data:`REFERENCE_CYCLES` (values and sources there), learned into a Fourier
series by the adaptive-frequency oscillator of :mod:`loops.cpg.learning`
(:func:`rtctl.loops.cpg.learning.build_reference_pattern`; regenerate the files with
``python -m loops.cpg``).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from .limits import Envelope

__all__ = [
    "AXES", "DATA_DIR", "FORMAT", "PatternFileError", "REFERENCE_CYCLES", "SHIPPED_PATTERNS", "ChewingPattern",
    "TEARDROP_PARAMETERS", "load_pattern", "save_pattern", "shipped_patterns", "teardrop_cycle",
]

FORMAT = "rtctl-cpg-pattern"
VERSION = 1
AXES = ("lateral_x", "anterior_posterior_y", "vertical_z")
MAX_HARMONICS = 32
DATA_DIR = Path(__file__).resolve().parent / "data"


class PatternFileError(ValueError):
    """A pattern file (or dict) that cannot be used; the message names the file and the field."""


def _field_error(where, field_name, message):
    return PatternFileError(f"{where}: field {field_name!r} {message}")


def _coefficients(where, name, value, n_harmonics):
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise _field_error(where, name, f"must be a 3 x {n_harmonics + 1} array of numbers, got {value!r:.80}") \
            from None
    if arr.shape != (3, n_harmonics + 1):
        raise _field_error(where, name, f"must have shape (3, n_harmonics + 1) = (3, {n_harmonics + 1}), "
                                      f"got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise _field_error(where, name, "must be finite")
    return arr


@dataclass(frozen=True, eq=False)
class ChewingPattern:
    """One chewing cycle as a Fourier series (module docstring); arrays are read-only copies.

    ``cos``/``sin``: (3, K + 1) coefficients (m); ``sin[:, 0]`` must be 0.
    ``reference``: optional (N, 3) cycle it was learned from, sampled at
    ``psi = 2 pi i / N``. ``metadata``: model parameters, kinematics, fit
    statistics and learning settings (JSON-serializable).
    """

    name: str
    frequency: float
    cos: np.ndarray
    sin: np.ndarray
    description: str = ""
    sources: tuple = ()
    reference: np.ndarray | None = None
    metadata: dict = field(default_factory=dict)

    def __post_init__(self):
        where = f"pattern {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise _field_error("pattern", "name", f"must be a non-empty string, got {self.name!r}")
        try:
            f = float(self.frequency)
        except (TypeError, ValueError):
            raise _field_error(where, "frequency_hz", f"must be a number, got {self.frequency!r}") from None
        if not math.isfinite(f) or f <= 0:
            raise _field_error(where, "frequency_hz", f"must be finite and > 0, got {self.frequency!r}")
        object.__setattr__(self, "frequency", f)
        cos = np.array(self.cos, dtype=np.float64) if not isinstance(self.cos, np.ndarray) else self.cos
        if cos.ndim != 2 or cos.shape[0] != 3 or not 2 <= cos.shape[1] <= MAX_HARMONICS + 1:
            raise _field_error(where, "cos", f"must have shape (3, K + 1) with 1 <= K <= {MAX_HARMONICS}, "
                                           f"got {cos.shape}")
        k = cos.shape[1] - 1
        cos = _coefficients(where, "cos", cos, k)
        sin = _coefficients(where, "sin", self.sin, k)
        if np.any(sin[:, 0] != 0.0):
            raise _field_error(where, "sin", f"column 0 (b_j0) must be 0, got {sin[:, 0].tolist()}")
        cos.setflags(write=False)
        sin.setflags(write=False)
        object.__setattr__(self, "cos", cos)
        object.__setattr__(self, "sin", sin)
        if self.reference is not None:
            ref = np.array(self.reference, dtype=np.float64)
            if ref.ndim != 2 or ref.shape[1] != 3 or ref.shape[0] < 2 * k + 2:
                raise _field_error(where, "reference", f"must be an (N, 3) array with N >= 2 K + 2 = {2 * k + 2}, "
                                                     f"got shape {ref.shape}")
            if not np.all(np.isfinite(ref)):
                raise _field_error(where, "reference", "must be finite")
            ref.setflags(write=False)
            object.__setattr__(self, "reference", ref)
        if not isinstance(self.description, str):
            raise _field_error(where, "description", f"must be a string, got {self.description!r}")
        sources = tuple(self.sources)
        if not all(isinstance(s, str) for s in sources):
            raise _field_error(where, "sources", f"must be a list of strings, got {self.sources!r}")
        object.__setattr__(self, "sources", sources)
        if not isinstance(self.metadata, dict):
            raise _field_error(where, "metadata", f"must be a mapping, got {type(self.metadata).__name__}")

    @property
    def n_harmonics(self) -> int:
        return self.cos.shape[1] - 1

    def evaluate(self, phase, derivative: int = 0) -> np.ndarray:
        """``d^n P / d psi^n`` at ``phase`` (rad, scalar or 1-D): shape (3,) or (3, len(phase)), m/rad^n."""
        psi = np.asarray(phase, dtype=np.float64)
        k = np.arange(self.n_harmonics + 1, dtype=np.float64)
        arg = np.multiply.outer(k, psi)
        kn = k ** derivative
        # d^n/dpsi^n cos(k psi) = k^n cos(k psi + n pi / 2), likewise for sin
        shift = derivative * math.pi / 2.0
        c = np.cos(arg + shift)
        s = np.sin(arg + shift)
        if derivative > 0:
            c[0] = 0.0
        return np.tensordot(self.cos * kn, c, axes=(1, 0)) + np.tensordot(self.sin * kn, s, axes=(1, 0))

    def packed(self, harmonics: int) -> np.ndarray:
        """Coefficients in the kernel layout ``a_0, a_1..a_H, b_1..b_H`` (3, 2 H + 1), zero-padded to ``H``."""
        k = self.n_harmonics
        if k > harmonics:
            raise ValueError(f"pattern {self.name!r} has {k} harmonics, more than the {harmonics} held")
        out = np.zeros((3, 2 * harmonics + 1))
        out[:, :k + 1] = self.cos
        out[:, harmonics + 1:harmonics + 1 + k] = self.sin[:, 1:]
        return out

    def envelope(self, frequency: float | None = None, scale=(1.0, 1.0, 1.0), samples: int = 4096) -> Envelope:
        """Steady-state extremes of the cycle played at ``frequency`` (Hz, default nominal) with per-axis
        ``scale``: opening ``max(-z)`` and the norms of ``p'``, ``p''``, ``p'''`` on ``samples`` phases."""
        w = 2.0 * math.pi * (self.frequency if frequency is None else float(frequency))
        sc = np.broadcast_to(np.asarray(scale, dtype=np.float64), (3,))[:, None]
        psi = np.linspace(0.0, 2.0 * math.pi, samples, endpoint=False)
        vals = [sc * self.evaluate(psi, d) * w ** d for d in range(4)]
        return Envelope(max(0.0, float(np.max(-vals[0][2]))),
                        *(float(np.max(np.linalg.norm(v, axis=0))) for v in vals[1:]))

    def kinematics(self, frequency: float | None = None, samples: int = 4096) -> dict:
        """Cycle measures at ``frequency`` (Hz): excursions (m), peak speeds (m/s), phase durations (s).

        ``opening``: ``max(-z)``; ``lateral_excursion``: ``max|x|``;
        ``anterior_posterior_range``: ``max y - min y``; ``peak_speed``: ``max |p'|``;
        ``peak_opening_speed``/``peak_closing_speed``: largest downward / upward ``|z'|``;
        ``mean_vertical_speed``: mean ``|z'|`` while the jaw is more than 5 % of the opening away from
        occlusion (the opening and closing strokes); ``opening_duration``/``closing_duration``: time
        from leaving that 5 % band to the largest opening, and back.
        """
        f = self.frequency if frequency is None else float(frequency)
        w = 2.0 * math.pi * f
        psi = np.linspace(0.0, 2.0 * math.pi, samples, endpoint=False)
        p = self.evaluate(psi)
        v = self.evaluate(psi, 1) * w
        opening = float(np.max(-p[2]))
        if not opening > 0.0:
            raise ValueError(f"pattern {self.name!r} never opens (max(-z) = {opening!r} m)")
        moving = -p[2] > 0.05 * opening
        i_open = int(np.argmax(-p[2]))
        # the stroke is the run of 'moving' samples that contains the largest opening
        run = np.roll(moving, -i_open)
        n_after = int(np.argmin(run)) if not run.all() else samples
        n_before = int(np.argmin(run[::-1])) if not run.all() else samples
        dt = 1.0 / (f * samples)
        return {
            "frequency_hz": f,
            "opening_m": opening,
            "lateral_excursion_m": float(np.max(np.abs(p[0]))),
            "anterior_posterior_range_m": float(np.ptp(p[1])),
            "peak_speed_m_s": float(np.max(np.linalg.norm(v, axis=0))),
            "peak_opening_speed_m_s": float(max(0.0, -np.min(v[2]))),
            "peak_closing_speed_m_s": float(max(0.0, np.max(v[2]))),
            "mean_vertical_speed_m_s": float(np.mean(np.abs(v[2][moving]))),
            "opening_duration_s": n_before * dt,
            "closing_duration_s": n_after * dt,
        }

    def fit_error(self) -> tuple[np.ndarray, np.ndarray]:
        """RMS and max |series - reference| per axis (m) over the stored reference cycle."""
        if self.reference is None:
            raise ValueError(f"pattern {self.name!r} has no reference cycle")
        n = self.reference.shape[0]
        err = self.evaluate(2.0 * math.pi * np.arange(n) / n).T - self.reference
        return np.sqrt(np.mean(err ** 2, axis=0)), np.max(np.abs(err), axis=0)

    def scaled(self, scale) -> "ChewingPattern":
        """This pattern with each axis multiplied by ``scale`` (3 values or a scalar)."""
        sc = np.broadcast_to(np.asarray(scale, dtype=np.float64), (3,))[:, None]
        ref = None if self.reference is None else self.reference * sc.T
        return ChewingPattern(self.name, self.frequency, self.cos * sc, self.sin * sc, self.description,
                              self.sources, ref, dict(self.metadata))

    def to_dict(self) -> dict:
        return {
            "format": FORMAT, "version": VERSION, "name": self.name, "description": self.description,
            "frequency_hz": self.frequency, "axes": list(AXES), "units": "m",
            "phase_origin": "psi = 0 where the fundamental of the vertical axis is highest (b_z1 = 0, a_z1 > 0)",
            "n_harmonics": self.n_harmonics, "cos": self.cos.tolist(), "sin": self.sin.tolist(),
            "reference": None if self.reference is None else self.reference.tolist(),
            "sources": list(self.sources), "metadata": self.metadata,
        }

    @classmethod
    def from_dict(cls, d, where: str = "pattern") -> "ChewingPattern":
        """Validate a dict of the file format; errors name ``where`` (the file) and the field."""
        if not isinstance(d, dict):
            raise PatternFileError(f"{where}: must hold a JSON object, got {type(d).__name__}")
        for key in ("format", "version", "name", "frequency_hz", "n_harmonics", "cos", "sin"):
            if key not in d:
                raise _field_error(where, key, "is missing")
        if d["format"] != FORMAT:
            raise _field_error(where, "format", f"must be {FORMAT!r}, got {d['format']!r}")
        if d["version"] != VERSION:
            raise _field_error(where, "version", f"must be {VERSION}, got {d['version']!r}")
        if not isinstance(d["name"], str) or not d["name"]:
            raise _field_error(where, "name", f"must be a non-empty string, got {d['name']!r}")
        k = d["n_harmonics"]
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_HARMONICS:
            raise _field_error(where, "n_harmonics", f"must be an integer in [1, {MAX_HARMONICS}], got {k!r}")
        f = d["frequency_hz"]
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not math.isfinite(f) or f <= 0:
            raise _field_error(where, "frequency_hz", f"must be a finite number > 0, got {f!r}")
        cos = _coefficients(where, "cos", d["cos"], k)
        sin = _coefficients(where, "sin", d["sin"], k)
        sources = d.get("sources", [])
        if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
            raise _field_error(where, "sources", "must be a list of strings")
        meta = d.get("metadata", {})
        if not isinstance(meta, dict):
            raise _field_error(where, "metadata", "must be an object")
        try:
            return cls(d["name"], float(f), cos, sin, d.get("description", ""), tuple(sources), d.get("reference"),
                       meta)
        except PatternFileError as exc:
            raise PatternFileError(str(exc).replace(f"pattern {d['name']!r}", where, 1)) from None


def save_pattern(pattern: ChewingPattern, path) -> Path:
    """Write ``pattern`` as JSON (format in the module docstring); returns the path."""
    path = Path(path)
    path.write_text(json.dumps(pattern.to_dict(), indent=1) + "\n")
    return path


def load_pattern(path) -> ChewingPattern:
    """Read a pattern file; :class:`PatternFileError` names the file and the field when it is malformed."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise PatternFileError(f"{path}: cannot read pattern file ({exc.strerror})") from None
    try:
        d = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PatternFileError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") \
            from None
    return ChewingPattern.from_dict(d, str(path))


# -- shipped reference cycles -------------------------------------------------------
#: ``max_s B(s) sin(s)`` = 3 sqrt(3) / 8 (at ``s = 2 pi / 3``), which normalises the sagittal loop term.
SAGITTAL_LOOP_PEAK = 3.0 * math.sqrt(3.0) / 8.0


def teardrop_cycle(phase, *, opening: float, lateral: float, posterior: float, vertical_exponent: int,
                   lateral_exponent: int, skew: float, sagittal_loop: float = 0.0) -> np.ndarray:
    """Reference chewing cycle at ``phase`` (rad; 0 = middle of the occlusal pause): (n, 3) displacements (m).

    With the skewed phase ``s = theta + skew (1 - cos theta)`` (a circle map for
    ``|skew| < 1``; ``skew < 0`` makes closing faster than opening) and the
    bump ``B = (1 - cos s) / 2`` (0 at occlusion, 1 at the largest opening)::

        z = -opening B^m,
        y = -posterior B^m + sagittal_loop B sin(s) / (3 sqrt(3) / 4),
        x = lateral B^l (1 - sin s) / 2 / max_s[B^l (1 - sin s) / 2]

    ``m = vertical_exponent`` flattens the occlusal pause; ``x`` is zero at
    mid-opening (the jaw opens near the midline), swings out to the working
    side around the largest opening, peaks early in the closing stroke and
    returns medially into occlusion: the teardrop-shaped frontal-plane
    envelope. ``y`` moves the incisal point posteriorly with the opening (the
    mandible rotates about the condyles) and, through the odd term
    ``B sin s``, on a different path down than up: at equal height (``s`` and
    ``2 pi - s`` have the same ``B``, so the same ``z``) the opening path lies
    ``sagittal_loop B sin(s) / (3 sqrt(3) / 8)`` anterior to the closing path,
    at most ``sagittal_loop`` (at ``s = 2 pi / 3``, ``B = 3/4``, where
    ``B sin s`` peaks at ``3 sqrt(3) / 8``): the sagittal-plane
    teardrop, closed at occlusion and at the largest opening.
    """
    if not -1.0 < skew < 1.0:
        raise ValueError(f"teardrop_cycle: skew must be in (-1, 1), got {skew!r}")
    th = np.asarray(phase, dtype=np.float64)
    s = th + skew * (1.0 - np.cos(th))
    b = 0.5 * (1.0 - np.cos(s))
    grid = np.linspace(0.0, 2.0 * np.pi, 20001)
    lat_max = np.max((0.5 * (1.0 - np.cos(grid))) ** lateral_exponent * 0.5 * (1.0 - np.sin(grid)))
    x = lateral * b ** lateral_exponent * 0.5 * (1.0 - np.sin(s)) / lat_max
    y = -posterior * b ** vertical_exponent + sagittal_loop * b * np.sin(s) / (2.0 * SAGITTAL_LOOP_PEAK)
    z = -opening * b ** vertical_exponent
    return np.stack([x, y, z], axis=-1)


_BUSCHANG = ("Buschang PH, Hayasaki H, Throckmorton GS (2000) Quantification of human chewing-cycle kinematics. "
             "Arch Oral Biol 45:461-474 -- gum chewing, mean cycle duration 835 ms (men) and 973 ms (women), "
             "i.e. 1.20 and 1.03 cycles/s")
_PASINATO = ("Pasinato F et al. (2017) Study of the kinematic variables of unilateral and habitual mastication of "
             "healthy individuals. CoDAS 29(2):e20160074, doi:10.1590/2317-1782/20172016074 -- habitual chewing "
             "1.29 +- 0.16 Hz (unilateral 1.19 +- 0.21 Hz); peak opening speed 80.0 mm/s (67.4), peak closing "
             "speed 83.5 +- 17 mm/s (71.8 +- 9.4), habitual (unilateral); harder consistency lengthens the cycle "
             "and the occlusal phase and enlarges vertical and lateral amplitude (their refs 4-5)")
_PEYRON = ("Peyron MA, Lassauzay C, Woda A (2002) Effects of increased hardness on jaw movement and muscle activity "
           "during chewing of visco-elastic model foods. Exp Brain Res 142:41-51 -- harder food: more cycles, "
           "more muscle activity, larger amplitude of the opening movement")
_THROCKMORTON = ("Throckmorton GS, Buschang PH, Hayasaki H, Phelan T (2001) The effects of chewing rates on "
                 "mandibular kinematics. J Oral Rehabil 28:328-334 -- vertical, lateral and antero-posterior "
                 "excursions are smaller in fast than in habitual or slow chewing")
_PROESCHEL = ("Proeschel PA (2006) Chewing patterns in subjects with normal occlusion and with malocclusions. "
              "Semin Orthod 12:138-149 -- frontal-plane incisal patterns: teardrop (drop-shaped) cycles with "
              "grinding features in normal occlusion")
_ISSUE = ("typical human values of issue 8: 1.0-1.5 chewing cycles/s, opening/closing speeds around 60 mm/s, "
          "vertical opening 15-20 mm, maximal incisal opening ~45 mm")
_ASSUMPTION_Y = ("modelling assumption (no cited value): posterior incisal travel of 0.25 m per m of opening, "
                 "from the rotation of the mandible about the condyles")
_SAGITTAL = ("sagittal teardrop: the chewing cycle is drop-shaped in the frontal and in the sagittal plane (the "
             "classical description of the masticatory cycle; Posselt 1957, J Prosthet Dent 7:375-385, ref. 1 of "
             "Kalani et al. 2018, for the border envelope it lies in). Closing path posterior to the opening path: the "
             "working-side condyle is back in its fossa early in the closing stroke while it still translates "
             "forward through the opening stroke. The separation (2.0 mm for a 17 mm opening) is a modelling "
             "assumption: the incisal-path figures of Kalani et al. (2018) are not in the stored text")

#: The shipped reference cycles: :func:`teardrop_cycle` parameters (m, Hz), what they represent, and sources.
REFERENCE_CYCLES = {
    "normal": dict(
        frequency_hz=1.25, opening=0.017, lateral=0.005, posterior=0.00425, vertical_exponent=2,
        lateral_exponent=2, skew=-0.05, sagittal_loop=0.002,
        description="habitual unilateral chewing of a soft bolus: 1.25 cycles/s, 17 mm vertical opening, "
                    "5 mm lateral excursion towards the working side, teardrop frontal-plane envelope",
        sources=(_ISSUE, _BUSCHANG, _PASINATO, _PROESCHEL, _ASSUMPTION_Y, _SAGITTAL)),
    "hard_food": dict(
        frequency_hz=1.0, opening=0.020, lateral=0.006, posterior=0.005, vertical_exponent=3,
        lateral_exponent=2, skew=-0.05, sagittal_loop=0.0024,
        description="chewing a hard bolus: slower (1.0 cycles/s), larger opening (20 mm) and lateral excursion "
                    "(6 mm), longer occlusal pause (vertical exponent 3)",
        sources=(_ISSUE, _PEYRON, _PASINATO, _THROCKMORTON, _PROESCHEL, _ASSUMPTION_Y, _SAGITTAL)),
    "lateral_grinding": dict(
        frequency_hz=1.1, opening=0.014, lateral=0.008, posterior=0.0035, vertical_exponent=2,
        lateral_exponent=1, skew=-0.05, sagittal_loop=0.0016,
        description="lateral grinding exercise: 1.1 cycles/s, 14 mm opening, 8 mm lateral excursion with a flat "
                    "(grinding) return into occlusion (lateral exponent 1)",
        sources=(_ISSUE, _PROESCHEL, _PASINATO, _ASSUMPTION_Y, _SAGITTAL)),
}
SHIPPED_PATTERNS = tuple(REFERENCE_CYCLES)
#: The keys of :data:`REFERENCE_CYCLES` entries that are :func:`teardrop_cycle` arguments.
TEARDROP_PARAMETERS = ("opening", "lateral", "posterior", "vertical_exponent", "lateral_exponent", "skew",
                       "sagittal_loop")

#: Settings of the adaptive-frequency learner for the shipped patterns (see :func:`loops.cpg.learning.learn_cycle`).
SHIPPED_LEARNING = dict(n_harmonics=8, initial_frequency=0.8, duration=60.0, dt=1e-3, coupling=20.0,
                        learning_rate=2.0, cycle_samples=256)


def reference_samples(name: str, samples: int) -> np.ndarray:
    """The shipped reference cycle ``name`` at ``samples`` phases ``2 pi i / samples`` of its model (n, 3)."""
    c = REFERENCE_CYCLES[name]
    params = {k: c[k] for k in TEARDROP_PARAMETERS}
    return teardrop_cycle(2.0 * np.pi * np.arange(samples) / samples, **params)


@lru_cache(maxsize=1)
def _load_shipped() -> tuple:
    return tuple((name, load_pattern(DATA_DIR / f"{name}.json")) for name in SHIPPED_PATTERNS)


def shipped_patterns() -> dict[str, ChewingPattern]:
    """The shipped patterns by name (loaded once from ``loops/cpg/data``)."""
    return dict(_load_shipped())

