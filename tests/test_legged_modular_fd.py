"""Shah, Saha & Dutt (2012) section 4.2: the module-level O(n) forward dynamics (block UDU^T of the GIM,
eqs. 28-30 and A.4-A.9, :func:`rtctl.plants.legged.modular.module_forward_dynamics`) against rtctl's link-level
articulated-body forward dynamics and against I^-1 (tau - h) from rtctl's CRBA and RNEA."""
from __future__ import annotations

import numpy as np
import pytest
from rtctl.plants.legged.model import planar_biped, spatial_quadruped
from rtctl.plants.legged.module_dynamics import ModularDynamics
from rtctl.plants.legged.opcount import link_partition, serial_chain

from rtctl.dynamics import Dynamics

TOL = 1e-10  # relative to the largest |qdd| of the reference; measured <= 2e-14

ROBOTS = {
    "biped, modules": planar_biped,
    "biped, links": lambda: link_partition(planar_biped()),
    "quadruped, modules": spatial_quadruped,
    "quadruped, links": lambda: link_partition(spatial_quadruped()),
    "fixed chain, one module": lambda: serial_chain(5),
    "fixed chain, links": lambda: link_partition(serial_chain(5)),
}


@pytest.mark.parametrize("name", list(ROBOTS))
def test_module_forward_dynamics_equals_link_level_aba_and_the_gim_solve(name):
    """Floating base (the biped's planar and the quadruped's Euler-angle module M_0, tau_0 = 0 as in eq. 25, and
    with base forces) and fixed base (a generic 5-link chain), modules as the paper's and one link per module:
    qdd equals rtctl's link-level ABA and I(q)^-1 (tau - h(q, qdot)) to 1e-10 relative, ground wrenches included,
    on random states; the result satisfies I qdd + h = tau. This checks the re-derived readings of the OCR'd text:
    U^{i,j} = N^{i T} A^{j,i T} Psi^j (A.6, printed in an order that does not multiply), Psi^i = Psi^^i I^^{i,-1}
    (A.7, printed "I^{i-1}") and step 1's twist rates at qdd = 0 (printed "qdot = 0")."""
    robot = ROBOTS[name]()
    m = robot.model
    md, dyn = ModularDynamics(robot), Dynamics(m)
    rng = np.random.default_rng(17)
    zero = np.zeros(m.nv)
    for trial in range(8):
        q = m.neutral_configuration() + 0.6 * rng.standard_normal(m.nq)
        v, tau, fext = rng.standard_normal(m.nv), 5.0 * rng.standard_normal(m.nv), rng.standard_normal((m.nbodies, 6))
        if trial % 2 == 0:
            tau[:robot.n_base] = 0.0
        md.set_external_wrenches(fext)
        qdd = md.forward_dynamics(q, v, tau).copy()
        aba = dyn.forward_dynamics(q, v, tau, f_ext=fext)
        gim = dyn.mass_matrix(q).copy()
        h = dyn.inverse_dynamics(q, v, zero, f_ext=fext).copy()
        solved = np.linalg.solve(gim, tau - h)
        scale = np.abs(solved).max()
        assert np.abs(qdd - aba).max() <= TOL * scale
        assert np.abs(qdd - solved).max() <= TOL * scale
        assert np.abs(gim @ qdd + h - tau).max() <= TOL * max(1.0, np.abs(tau - h).max()) * np.abs(gim).max()


@pytest.mark.slow
def test_module_forward_dynamics_inverts_the_module_inverse_dynamics():
    """FD(q, qdot, ID(q, qdot, qdd)) = qdd for the module recursions of Figs. A.1 and A.2 alike."""
    robot = spatial_quadruped()
    m = robot.model
    md = ModularDynamics(robot)
    rng = np.random.default_rng(4)
    q, v, a = m.neutral_configuration() + 0.3 * rng.standard_normal(m.nq), rng.standard_normal(m.nv), \
        rng.standard_normal(m.nv)
    tau = md.inverse_dynamics(q, v, a).copy()
    assert np.abs(md.forward_dynamics(q, v, tau) - a).max() <= 1e-10 * np.abs(a).max()
    with pytest.raises(ValueError, match="tau must be 18 finite numbers"):
        md.forward_dynamics(q, v, np.full(m.nv, np.nan))
