"""Per-call inverse dynamics, 3-dof 8-link GRM of Chen & Wang (1998): virtual-link model vs brute-force Lagrangian.

Both in the same run on the same random states. Virtual-link: G_v by the compiled recursive core on the
virtual EOLC + G_s (eqs. 14-21), one compiled call (`GRMDynamics.inverse_dynamics`, Python wrapper
included) -- target <= 20 us. Brute force: the Lagrangian of all links, M by polarisation of T, dM/dtheta
and g by complex step (numpy). Also the input torques xi = A^-1 tau. Usage: python benchmarks/geared.py
"""
import time

import numpy as np

from rtctl.plants.geared.model import grm3
from rtctl.plants.geared.reference import brute_force_dynamics


def per_call(fn, states, repeat):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        for q, v, a in states:
            fn(q, v, a)
        best = min(best, (time.perf_counter() - t0) / len(states))
    return best


def main():
    mech = grm3()
    d = mech.dynamics()
    rng = np.random.default_rng(0)
    states = [(rng.uniform(-3, 3, 3), rng.uniform(-3, 3, 3), rng.uniform(-5, 5, 3)) for _ in range(200)]
    out = np.empty(3)
    d.inverse_dynamics(*states[0], out=out)  # compile / cache load
    t_vl = per_call(lambda q, v, a: d.inverse_dynamics(q, v, a, out=out), states, 20)
    t_xi = per_call(lambda q, v, a: d.actuator_inverse_dynamics(q, v, a), states, 10)
    t_bf = per_call(lambda q, v, a: brute_force_dynamics(mech, q, v, a), states[:20], 2)
    err = max(np.abs(d.inverse_dynamics(q, v, a) - brute_force_dynamics(mech, q, v, a)[0]).max()
              for q, v, a in states[:20])
    print("GRM 3-dof inverse dynamics, per call (best of repeats)")
    print(f"  {'virtual-link ID (tau, compiled)':<40}{t_vl * 1e6:>10.2f} us   target <= 20 us: "
          f"{'met' if t_vl <= 20e-6 else 'NOT met'}")
    print(f"  {'virtual-link ID -> xi = A^-1 tau':<40}{t_xi * 1e6:>10.2f} us")
    print(f"  {'brute-force Lagrangian (complex step)':<40}{t_bf * 1e6:>10.1f} us   ({t_bf / t_vl:.0f}x)")
    print(f"  max |tau_vl - tau_bf| on 20 states: {err:.2e} N m")


if __name__ == "__main__":
    main()
