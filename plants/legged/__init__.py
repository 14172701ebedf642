"""Legged robots by the modular recursive DeNOC dynamics of Shah, Saha & Dutt (2012).

``model`` (planar biped, spatial quadruped), ``plant`` (compliant ground), ``gait`` (the gaits and leg
inverse kinematics of Appendix B), ``control`` (feed-forward + PD and computed torque with the ground
wrenches), two run configs and ``plots``.
"""
