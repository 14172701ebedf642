"""Seed 002: geared robotic mechanisms by the virtual-link method (Chen & Wang 1998).

``description`` (links, turning and gear pairs, TOML), ``model`` (GRM, virtual EOLC model), ``kernels``
(compiled virtual-link dynamics), ``energy`` (all links' energies), ``plant``, ``control``
(``geared_computed_torque``), ``geared.toml``, ``plots`` and ``reference`` (element-by-element G_s and the
brute-force Lagrangian the tests check against).
"""
