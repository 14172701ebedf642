"""Closed-chain mechanisms with their own analytic models (reusable by plants, controllers and tests).

* :mod:`rtctl.mechanisms.stewart` -- the 6-UPS Stewart platform of seed 001
  (Lopes, generalized-momentum dynamics): :class:`StewartPlatform`.
* :mod:`rtctl.mechanisms.opcount` -- operation counts of its Coriolis matrices (Table 1).
* :mod:`rtctl.mechanisms.quadruped_tail` -- the quadruped with a robotic tail of seed 000
  (Liu & Ben-Tzvi, virtual-work dynamics): :class:`QuadrupedTail`.
* :mod:`rtctl.mechanisms.geared` -- geared robotic mechanisms of seed 002 (Chen & Wang,
  virtual-link method).
* :mod:`rtctl.mechanisms.jaw` -- the jaw-rehabilitation robot of seed 003 (Kalani et al.,
  two Gough-Stewart platforms, Gibbs-Appell dynamics): :class:`JawRehabRobot`.
* :mod:`rtctl.mechanisms.legged` -- the planar biped and spatial quadruped of seed 004
  (Shah, Saha & Dutt): :class:`LeggedRobot` (full floating-base trees).

:data:`ACTUATOR_MODELS` maps the built-in mechanism names usable as
``[robot] model`` in a run config to a factory of their actuator-space model.
"""
from __future__ import annotations


def _stewart_actuator_model():
    from .stewart import StewartPlatform
    return StewartPlatform().actuator_model("stewart")


def _quadruped_tail_actuator_model():
    from .quadruped_tail import QuadrupedTail
    return QuadrupedTail().actuator_model("quadruped_tail")


def _jaw_actuator_model():
    from .jaw import JawRehabRobot
    return JawRehabRobot().actuator_model("jaw")


def _legged_model(name):
    def factory():
        from .legged import LEGGED_ROBOTS
        return LEGGED_ROBOTS[name]().model
    return factory


ACTUATOR_MODELS = {"stewart": _stewart_actuator_model, "quadruped_tail": _quadruped_tail_actuator_model,
                   "planar_biped": _legged_model("planar_biped"),
                   "spatial_quadruped": _legged_model("spatial_quadruped"), "jaw": _jaw_actuator_model}


def actuator_model(name: str):
    """The actuator-space model of the built-in mechanism ``name`` (a key of :data:`ACTUATOR_MODELS`)."""
    try:
        return ACTUATOR_MODELS[name]()
    except KeyError:
        raise ValueError(f"unknown mechanism {name!r}; available: {sorted(ACTUATOR_MODELS)}") from None
