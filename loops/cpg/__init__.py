"""Central pattern generator for a jaw-rehabilitation robot (Kalani et al., 2018; issue 8).

The CPG produces the incisal point's displacement from occlusion -- [lateral
x, anterior-posterior y, vertical z (up; opening is negative)] in m -- with its
velocity, acceleration and jerk, one compiled allocation-free call per control
cycle. Its rhythm is three phase-coupled Hopf oscillators (one per axis, a
stable limit cycle: perturbations decay, the axes phase-lock, sensory feedback
shifts the phase; Righetti, Buchli & Ijspeert 2006; Righetti & Ijspeert 2006);
each plays its axis of a Fourier series learned from a reference chewing cycle
by an adaptive-frequency oscillator with a Fourier feedback layer (the
"Fourier-series tuning of the CPG" of Kalani et al., 2018; Gams et al. 2009, Petric et al.
2011), scaled by its amplitude, and is modulated online -- frequency, per-axis
amplitude, pattern -- through critically damped filters so that the output
stays smooth, within therapist limits checked before a request is accepted.

* :class:`ChewingCPG` (:mod:`loops.cpg.generator`): ``step(dt)``, outputs
  ``p``/``pd``/``pdd``/``pjerk``, ``set_frequency``, ``set_amplitude``,
  ``set_pattern`` (keeps the frequency), ``set_feedback``, ``perturb``, ``stop``,
  ``reset``, ``predict``, ``patterns``, ``targets``, ``phases``, ``radii``.
* :class:`TherapistLimits`, :class:`Refused`, :class:`Envelope` (:mod:`loops.cpg.limits`).
* :class:`ChewingPattern`, :func:`load_pattern`, :func:`save_pattern`,
  :func:`shipped_patterns` -- ``normal``, ``hard_food``, ``lateral_grinding``
  (:mod:`loops.cpg.patterns`, data in ``loops/cpg/data``).
* :func:`learn_pattern`, :func:`learn_cycle`, :class:`LearningResult` (:mod:`loops.cpg.learning`).
* :func:`cpg_step` (:mod:`loops.cpg.oscillators`): the compiled kernel itself.
"""
from .generator import DEFAULT_FILTER_RATE, ChewingCPG
from .learning import LearningResult, fourier_coefficients, learn_cycle, learn_pattern
from .limits import Envelope, Refused, TherapistLimits
from .oscillators import cpg_step
from .patterns import (
    SHIPPED_PATTERNS, ChewingPattern, PatternFileError, load_pattern, save_pattern, shipped_patterns,
)

__all__ = [
    "DEFAULT_FILTER_RATE", "SHIPPED_PATTERNS", "ChewingCPG", "ChewingPattern", "Envelope", "LearningResult",
    "PatternFileError", "Refused", "TherapistLimits", "cpg_step", "fourier_coefficients", "learn_cycle",
    "learn_pattern", "load_pattern", "save_pattern", "shipped_patterns",
]
