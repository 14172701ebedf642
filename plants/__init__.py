"""Simulated robots (plants), one module per system.

Importing the package registers the bundled plants with :func:`create_plant`:

* ``"rigid_body"`` -- :class:`~plants.rigid_body.RigidBodyPlant`, any rtctl
  model's rigid-body dynamics with joint friction (RK4 or semi-implicit Euler).
"""
from .base import Plant, create_plant, register_plant
from . import rigid_body
from .rigid_body import RigidBodyPlant
from . import stewart  # noqa: F401  registers "stewart" (seed 001's Stewart platform)
from . import geared  # noqa: F401  registers "geared" (seed 002's geared robotic mechanisms)
from . import quadruped_tail  # noqa: F401  registers "quadruped_tail" (seed 000's quadruped with a tail)
from . import jaw  # noqa: F401  registers "jaw" (seed 003's jaw-rehabilitation robot with the jaw model)
from . import legged  # noqa: F401  registers "legged" (seed 004's legged robots on a compliant ground)

__all__ = ["Plant", "create_plant", "register_plant", "RigidBodyPlant", "rigid_body"]
