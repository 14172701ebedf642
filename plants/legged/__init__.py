"""Seed 004: legged robots by modular recursive DeNOC dynamics (Shah, Saha & Dutt).

``model`` (planar biped, spatial quadruped), ``plant`` (compliant ground), ``gait`` (the gaits and leg
inverse kinematics of Appendix B), ``control`` (feed-forward + PD and computed torque with the ground
wrenches), two run configs and ``plots``.
"""
