"""The compiled kernels allocate nothing: numba's runtime allocation counter does not move.

Runs in a subprocess because the counters must be enabled (NUMBA_NRT_STATS=1)
before numba starts. The kernels are driven from a compiled loop, as a compiled
control step calls them: a call from the Python interpreter additionally wraps
each NumPy argument at the boundary (one small bookkeeping allocation per array
argument), which the comparison of 1 and 300 calls cancels out.
"""
import textwrap

import pytest

from allocation_counter import run_with_allocation_counters

SCRIPT = textwrap.dedent("""
    import numpy as np
    from numba import njit
    from numba.core.runtime import rtsys
    from rtctl import bundled_model_path
    from rtctl.dynamics import Dynamics, kernels as k
    from rtctl.model.urdf import load_urdf

    @njit
    def cycles(n, mi, mf, ws, mat, chol, q, v, a, out, qn, jac, six):
        bad = 0
        for _ in range(n):
            bad += k.rnea(mi, mf, ws, q, v, a, out)
            bad += k.crba(mi, mf, ws, q, mat)
            bad += k.aba(mi, mf, ws, q, v, a, out)
            bad += k.forward_dynamics_cholesky(mi, mf, ws, chol, q, v, a, out)
            k.kinematics(mi, mf, ws, q, v, a, 0.0)
            k.point_jacobian(mi, ws, mi.shape[0] - 1, 0.1, 0.0, 0.0, jac)
            k.point_acceleration(ws, mi.shape[0] - 1, 0.1, 0.0, 0.0, six)
            k.center_of_mass(mi, mf, ws, six)
            k.energy(mi, mf, ws, six)
            k.integrate(mi, q, v, 1e-3, qn)
            k.configuration_rate(mi, q, v, qn)
        return bad

    for name, base in (("arm7", None), ("humanoid", "free_flyer")):
        dyn = Dynamics(load_urdf(bundled_model_path(name), base))
        m = dyn.model
        rng = np.random.default_rng(0)
        args = (dyn.mi, dyn.mf, dyn.ws, np.zeros((m.nv, m.nv)), dyn._mat, m.random_configuration(rng),
                rng.normal(size=m.nv), rng.normal(size=m.nv), np.zeros(m.nv), np.zeros(m.nq),
                np.zeros((6, m.nv)), np.zeros(6))
        assert cycles(1, *args) == 0  # compile
        counts = allocations(cycles, *args)
        print(name, "allocations for 1 and 300 cycles:", counts)
        assert counts[0] == counts[1], (name, counts)
    print("OK")
""")


@pytest.mark.slow
def test_kernels_allocate_nothing_per_call():
    out = run_with_allocation_counters(SCRIPT)
    assert out.strip().endswith("OK")
