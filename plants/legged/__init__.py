"""Seed 004: legged robots by modular recursive DeNOC dynamics (Shah, Saha & Dutt).

``model`` (planar biped, spatial quadruped), ``plant`` (compliant ground), ``control`` (gaits,
feed-forward + PD and computed torque of Appendix B), two run configs and ``plots``.
"""
