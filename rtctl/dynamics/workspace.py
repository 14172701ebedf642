"""Workspace layout, status codes and argument checks shared by the dynamics kernels.

Every kernel takes the packed model (``mi`` integer rows, ``mf`` float rows,
gravity in ``mf[nbodies, 0:3]``, see :mod:`rtctl.model`), the workspace ``ws``
(one float row per body, laid out by the ``W_*`` columns below) and plain
vectors; none of them allocates.

The quantities of each DOF of a body's joint (its column of S, ...) sit in a
block of ``DOF_WIDTH`` columns. Loops over a joint's DOFs that store something
per DOF walk the block offsets in a ``while`` loop: LLVM vectorizes a ``for``
loop of unknown trip count (gathers, scatters and run-time overlap checks),
which costs more than the one to six iterations it stands for.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..model import MI_IQ, MI_IV, MI_NQ, MI_NV

# Workspace columns (per body row); vectors in world axes, moments and inertias about the body origin O_k.
# What every kernel touches for every body comes first, the ABA's articulated quantities next, then one
# block of DOF_WIDTH columns per DOF of the body's joint, so a 1-DOF body uses one contiguous stretch.
W_R = 0          # 9: world rotation of the body frame, row-major (the joint transform X_J inside forward_kinematics)
W_O = 9          # 3: world position of the body origin O_k
W_D = 12         # 3: centre-of-mass offset from O_k (d_k)
W_I = 15         # 6: rotational inertia about O_k (xx yy zz xy xz yz)
W_OMEGA = 21     # 3: angular velocity
W_VEL = 24       # 3: velocity of O_k
W_ALPHA = 27     # 3: angular acceleration
W_ACC = 30       # 3: acceleration of O_k
W_C = 33         # 6: velocity-product acceleration c_k (twist rate at zero joint acceleration, less A t'_parent)
W_WRENCH = 39    # 6: [n; f] about O_k (composite, after the backward pass)
W_FEXT = 45      # 6: external wrench on the body [n; f] about O_k
W_IA = 51        # 36: articulated (or spatial) 6x6 inertia about O_k, row-major
W_PA = 87        # 6: articulated bias wrench pA_k
W_CM = 93        # 1: composite mass
W_CH = 94        # 3: composite first moment about O_k
W_CI = 97        # 6: composite rotational inertia (about O_k, or about P_k in the CRBA)
W_P = 103        # 3: P_k, the origin of the root of body k's subtree (the CRBA's reference point)
W_TRIG = 106     # 2: sin and cos of a revolute joint's angle (joints.joint_trig, before the poses)
W_DOF = 108      # 6 blocks of DOF_WIDTH columns, block j for DOF j of the body's joint:
DOF_WIDTH = 25
W_S = W_DOF      # 6: column j of the motion subspace S_k, [angular; linear]
W_E = W_S        # 3: a revolute joint's axis e_k (the angular part of its one column of S_k)
W_SP = W_DOF + 6     # 6: column j of S_k referred to P_k: [a; l + (O_k - P_k) x a] (the CRBA's)
W_U = W_DOF + 12     # 6: column j of U_k L_k^-T, U_k = IA_k S_k
W_UU = W_DOF + 18    # 1: entry j of L_k^-1 u_k, u_k = tau_k - S_k^T pA_k
W_DLDL = W_DOF + 19  # 6: row j of D_k = S_k^T U_k + armature = L_k Delta_k L_k^T (spatial.ldlt_factor)
WS_WIDTH = W_DOF + 6 * DOF_WIDTH

# Status codes returned by the entry kernels.
OK = 0
NOT_FINITE = 0    # + k: the k-th vector argument (1-based, after the workspace) has NaN or inf
WRONG_LENGTH = 10  # + k: the k-th vector argument has the wrong length
SINGULAR = 20     # an articulated inertia or the mass matrix is not positive definite

# Explicit signatures: numba rejects wrong dtypes or ranks with TypeError instead of compiling a variant.
# The entry kernels are compiled with ENTRY_OPTIONS, without numba's reference-counting runtime
# (``_nrt=False``): they allocate nothing (compiling one that did would fail), and a call from Python then
# does not give each array argument a runtime record (a heap block and a GIL round trip each, ~20 ns per
# array) nor count references inside -- together about a quarter of a 6-DOF inverse dynamics call from
# Python (benchmarks/dynamics.py). No fastmath: contraction to fused multiply-adds alone was 4-8 % faster
# but moved the ill-conditioned forward dynamics of iCub (tests/test_real_urdfs.py) past the 1e-9
# agreement with Pinocchio. The CRBA's own steps after the shared forward kinematics contract
# (mass_matrix.CONTRACT): the mass matrix stays within 1e-9 there.
ENTRY_OPTIONS = {"cache": True, "_nrt": False}
_M = "int64[:, ::1], float64[:, ::1], float64[:, ::1]"
SIG_Q_V_A_OUT = f"int64({_M}, float64[::1], float64[::1], float64[::1], float64[::1])"
SIG_Q_V_TAU_EXTRA_OUT = f"int64({_M}, float64[::1], float64[::1], float64[::1], float64[::1], float64[::1])"
SIG_Q_MAT = f"int64({_M}, float64[::1], float64[:, ::1])"
SIG_MAT_Q_V_TAU_OUT = f"int64({_M}, float64[:, ::1], float64[::1], float64[::1], float64[::1], float64[::1])"


@njit(cache=True, forceinline=True)
def all_finite(x):
    for k in range(x.shape[0]):
        if not np.isfinite(x[k]):
            return False
    return True


@njit(cache=True, forceinline=True)
def model_sizes(mi):
    """(nq, nv) of a packed model."""
    last = mi.shape[0] - 1
    return mi[last, MI_IQ] + mi[last, MI_NQ], mi[last, MI_IV] + mi[last, MI_NV]


@njit(cache=True, forceinline=True)
def check_vectors(mi, q, v, a, out):
    """Status of the usual (q, v, a-or-tau, out) arguments: lengths first, then finiteness."""
    nq, nv = model_sizes(mi)
    if q.shape[0] != nq:
        return WRONG_LENGTH + 1
    if v.shape[0] != nv:
        return WRONG_LENGTH + 2
    if a.shape[0] != nv:
        return WRONG_LENGTH + 3
    if out.shape[0] != nv:
        return WRONG_LENGTH + 4
    if not all_finite(q):
        return NOT_FINITE + 1
    if not all_finite(v):
        return NOT_FINITE + 2
    if not all_finite(a):
        return NOT_FINITE + 3
    return OK
