"""Seed 000: the quadruped with a robotic tail (Liu & Ben-Tzvi, virtual work).

``model`` (:class:`~rtctl.plants.quadruped_tail.model.QuadrupedTail`), ``plant``, ``control``
(feed-forward + PD, open loop, pitch and hold trajectories), two run configs and ``plots``.
"""
