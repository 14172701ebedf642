"""Simulated robots, one folder per system (model, plant, controllers, configs, plots together).

* :mod:`rtctl.plants.rigid_body` -- ``"rigid_body"``: any rtctl model's rigid-body dynamics
  with joint friction and end stops (URDF robots such as the bundled ``arm7``).
* :mod:`rtctl.plants.quadruped_tail` -- Liu & Ben-Tzvi (2018), quadruped with a robotic tail (virtual work).
* :mod:`rtctl.plants.stewart` -- Lopes (2009), Stewart platform (generalized momentum).
* :mod:`rtctl.plants.geared` -- Chen & Wang (1998), geared robotic mechanisms (virtual link).
* :mod:`rtctl.plants.jaw` -- Kalani et al. (2018), jaw-rehabilitation robot (Gibbs-Appell) and its CPG.
* :mod:`rtctl.plants.legged` -- Shah, Saha & Dutt (2012), legged robots (modular DeNOC) on a compliant ground.

Components are found by name through :mod:`rtctl.registry`; importing this package imports none
of the robots.
"""
from .base import Plant, create_plant

__all__ = ["Plant", "create_plant"]
