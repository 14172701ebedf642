"""MuJoCo as a plant (optional extra ``rtctl[mujoco]``): MuJoCo models simulated behind rtctl's plant
interface, and rtctl models built from them.

* :mod:`rtctl.plants.mujoco.model` -- an MJCF or URDF compiled by MuJoCo as an :class:`rtctl.model.Model`
  (same q, v ordering; conversions of the free-flyer state), with errors naming the element rtctl cannot
  represent; and the reverse, an rtctl model as an MJCF (:func:`~rtctl.plants.mujoco.export.mjcf_from_model`).
* :mod:`rtctl.plants.mujoco.plant` -- ``"mujoco"``: :class:`~rtctl.plants.mujoco.plant.MujocoPlant`.
* Bundled models (``[plant] model = "panda"``, ``"solo12"``, ``"planar_biped"``) and the example configs
  ``mujoco_panda.toml``, ``mujoco_solo12.toml``; ``plots.py`` runs the planar biped of Shah, Saha & Dutt (2012)
  on MuJoCo's contact beside rtctl's compliant ground.

Importing this package does not import ``mujoco``; using it without ``mujoco`` installed raises ImportError
saying ``pip install "rtctl[mujoco]"``.
"""
