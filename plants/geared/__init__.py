"""Seed 002: geared robotic mechanisms by the virtual-link method (Chen & Wang 1998).

``model`` (GRM, virtual EOLC model, brute-force Lagrangian check), ``plant``, ``control``
(``geared_computed_torque``), ``geared.toml`` and ``plots``.
"""
