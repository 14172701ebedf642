"""Simulated robots (plants), one module per system.

Importing the package registers the bundled plants with :func:`create_plant`:

* ``"rigid_body"`` -- :class:`~plants.rigid_body.RigidBodyPlant`, any rtctl
  model's rigid-body dynamics with joint friction (RK4 or semi-implicit Euler).
"""
from .base import Plant, create_plant, register_plant
from . import rigid_body
from .rigid_body import RigidBodyPlant

__all__ = ["Plant", "create_plant", "register_plant", "RigidBodyPlant", "rigid_body"]
