"""Floating-base state estimators inside the control cycle (:mod:`loops.estimation.base`)."""
from .base import Estimator
from .invariant_ekf_estimator import InvariantEKF
from .leg_odometry import LegOdometryKF

__all__ = ["Estimator", "InvariantEKF", "LegOdometryKF"]
