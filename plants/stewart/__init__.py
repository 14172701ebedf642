"""The 6-UPS Stewart platform of Lopes (2009), by generalized momentum.

``model`` (:class:`~rtctl.plants.stewart.model.StewartPlatform` over the compiled ``kernels`` and
``solvers``), ``steps`` (the compiled plant, controller and trajectory steps), ``plant``, ``control``
(computed torque, pose trajectories), ``opcount`` (Table 1), ``stewart.toml`` (run config), ``plots``
(the paper's figures) and ``reference`` (the generic-core cross-check of the tests and benchmarks).
"""
