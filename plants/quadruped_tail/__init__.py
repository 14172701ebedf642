"""The quadruped with a robotic tail of Liu & Ben-Tzvi (2018), by virtual work.

``model`` (:class:`~rtctl.plants.quadruped_tail.model.QuadrupedTail` over the compiled ``kinematics``
and ``dynamics``), ``plant``, ``control`` (feed-forward + PD, open loop, pitch and hold trajectories),
two run configs, ``plots`` and ``reference`` (the generic-core cross-check of the tests and benchmarks).
"""
