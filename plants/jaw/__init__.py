"""The masticatory rehabilitation robot of Kalani et al. (2018), its Gibbs-Appell dynamics and its chewing CPG.

``model`` (:class:`~rtctl.plants.jaw.model.JawRehabRobot` over ``kernels``), ``steps`` (the compiled
plant and controller steps), ``plant`` (robot + jaw + patient), ``control`` (computed torque,
feed-forward + PD), ``cpg_trajectory`` (the CPG of :mod:`rtctl.loops.cpg` driving the legs), ``session``
(recorded therapy sessions), run configs and ``reference`` (the plain-NumPy Gibbs-Appell model the
tests check the kernel against).
"""
