"""Seed 001: the 6-UPS Stewart platform (Lopes 2009, generalized momentum).

``model`` (:class:`~rtctl.plants.stewart.model.StewartPlatform` over the compiled ``kernels``),
``plant``, ``control`` (computed torque, pose trajectories), ``opcount`` (Table 1),
``stewart.toml`` (run config) and ``plots`` (the paper's figures).
"""
