"""Geared robotic mechanisms by the virtual-link method of Chen & Wang (1998), planetary trains included.

``description`` (links, turning and gear pairs, the ``[mechanism]`` schema), ``model`` (GRM, virtual EOLC model,
the robot model ``"geared"`` built from a run config's ``[mechanism]`` section), ``kernels`` (compiled
virtual-link dynamics), ``energy`` (all links' energies, every planet), ``plant``, ``control``
(``geared_computed_torque``), ``geared.toml`` (the section-7 arm), ``planetary.toml`` (a planetary stage, carrier
as output), ``plots`` and ``reference`` (element-by-element G_s and the brute-force Lagrangian the tests check
against).
"""
