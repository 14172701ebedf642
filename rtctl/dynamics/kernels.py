"""The dynamics kernels under one name: ``from rtctl.dynamics.kernels import rnea, W_FEXT, ...``.

The kernels live in modules along their meaning; this module re-exports their public names:

* :mod:`~rtctl.dynamics.workspace` -- workspace columns ``W_*``, status codes, argument checks;
* :mod:`~rtctl.dynamics.spatial` -- 3-vector and small-matrix algebra;
* :mod:`~rtctl.dynamics.joints` -- the joint model (``jcalc``: placed joint transform; ``motion_subspace``);
* :mod:`~rtctl.dynamics.kinematics` -- poses, twists, Jacobians, centre of mass, energy, integration;
* :mod:`~rtctl.dynamics.inverse` -- recursive inverse dynamics (RNEA) and its floating-base variant;
* :mod:`~rtctl.dynamics.mass_matrix` -- the mass matrix by composite modules (CRBA);
* :mod:`~rtctl.dynamics.forward` -- the articulated-body algorithm and the M + Cholesky reference.

Every kernel takes the packed model (``mi``, ``mf``), the workspace ``ws`` and
plain vectors and allocates nothing. Kernels that take user vectors first
check them and return a status code (0 = ok, k = the k-th vector argument is
not finite, ...) instead of raising, so they can be called from other compiled code.
"""
from __future__ import annotations

from .forward import aba, aba_with_inertia, forward_dynamics_cholesky
from .inverse import body_forces, floating_base_rnea, rnea, transmitted_wrench
from .joints import jcalc, joint_configuration_rate, joint_integrate, motion_subspace
from .kinematics import (center_of_mass, configuration_rate, energy, forward_kinematics, integrate, kinematics,
                         point_acceleration, point_jacobian)
from .mass_matrix import crba
from .workspace import (DOF_WIDTH, NOT_FINITE, OK, SIG_MAT_Q_V_TAU_OUT, SIG_Q_MAT, SIG_Q_V_A_OUT, SINGULAR, W_ACC,
                        W_ALPHA, W_C, W_CH, W_CI, W_CM, W_D, W_DLDL, W_DOF, W_E, W_FEXT, W_I, W_IA, W_O, W_OMEGA,
                        W_P, W_PA, W_R, W_S, W_SP, W_TRIG, W_U, W_UU, W_VEL, W_WRENCH, WRONG_LENGTH, WS_WIDTH,
                        all_finite, check_vectors, model_sizes)

__all__ = [
    "DOF_WIDTH", "NOT_FINITE", "OK", "SIG_MAT_Q_V_TAU_OUT", "SIG_Q_MAT", "SIG_Q_V_A_OUT", "SINGULAR", "WRONG_LENGTH",
    "WS_WIDTH", "W_ACC", "W_ALPHA", "W_C", "W_CH", "W_CI", "W_CM", "W_D", "W_DLDL", "W_DOF", "W_E", "W_FEXT", "W_I",
    "W_IA", "W_O", "W_OMEGA", "W_P", "W_PA", "W_R", "W_S", "W_SP", "W_TRIG", "W_U", "W_UU", "W_VEL", "W_WRENCH",
    "aba",
    "aba_with_inertia", "body_forces", "all_finite", "center_of_mass", "check_vectors", "configuration_rate", "crba", "energy",
    "floating_base_rnea", "forward_dynamics_cholesky", "forward_kinematics", "integrate", "jcalc",
    "joint_configuration_rate", "joint_integrate", "kinematics", "model_sizes", "motion_subspace",
    "point_acceleration", "point_jacobian", "rnea", "transmitted_wrench",
]
