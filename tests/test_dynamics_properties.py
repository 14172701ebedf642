"""Physical and numerical truths of the dynamics core, independent of any other library.

* inverse -> forward dynamics round trip (both forward algorithms), 1e-9 relative;
* M symmetric positive definite, and 1/2 v^T M v equal to the kinetic energy summed body by body;
* M of a floating robot does not depend on where its base is: 3 km away, within 1e-10 of M at the origin;
* gravity forces equal the gradient of the potential energy (central differences, 1e-6);
* O(n) articulated-module forward dynamics equals the O(n^3) Cholesky reference, 1e-9, also with an inertia
  added on the joints' diagonal (the linearly implicit step's ``gamma h B``) against ``M + diag(extra)``;
* an unforced simulation conserves energy (RK4, 1 ms steps): relative drift < 1e-7 over 1 s;
* bad inputs raise ValueError naming the argument; what numba refuses (lists, views, other dtypes) is converted.
"""
import numpy as np
import pytest

from oracle import close
from rtctl import bundled_model_path
from rtctl.dynamics import Dynamics
from rtctl.dynamics import kernels
from rtctl.model.urdf import load_urdf

MODELS = [("arm7", None), ("arm7", "euler"), ("quadruped12", "free_flyer"), ("quadruped12", "euler"),
          ("humanoid", "free_flyer")]


@pytest.fixture(scope="module", params=MODELS, ids=lambda p: f"{p[0]}-{p[1] or 'fixed'}")
def dyn(request):
    name, base = request.param
    return Dynamics(load_urdf(bundled_model_path(name), base))


def random_state(model, rng):
    q = model.random_configuration(rng)
    if model.body_names[0].endswith("_Tx"):  # Euler chain: keep the pitch away from gimbal lock
        q[4] = rng.uniform(-1.2, 1.2)
    return q, rng.normal(size=model.nv), rng.normal(size=model.nv)


def test_inverse_then_forward_dynamics_round_trip(dyn):
    rng = np.random.default_rng(1)
    for _ in range(5):
        q, v, a = random_state(dyn.model, rng)
        f_ext = rng.normal(size=(dyn.model.nbodies, 6))
        tau = dyn.inverse_dynamics(q, v, a, f_ext=f_ext).copy()
        assert close(dyn.forward_dynamics(q, v, tau, f_ext=f_ext), a)
        assert close(dyn.forward_dynamics_cholesky(q, v, tau, f_ext=f_ext), a)


def test_mass_matrix_symmetric_positive_definite_and_equal_to_kinetic_energy(dyn):
    rng = np.random.default_rng(2)
    for _ in range(5):
        q, v, _ = random_state(dyn.model, rng)
        m = dyn.mass_matrix(q).copy()
        assert np.array_equal(m, m.T)
        assert np.linalg.eigvalsh(m)[0] > 0
        kinetic, _ = dyn.energy(q, v)
        assert abs(0.5 * v @ m @ v - kinetic) <= 1e-12 * max(1.0, kinetic)
        assert close(dyn.inverse_dynamics(q, v, v) - dyn.nonlinear_effects(q, v), m @ v)


@pytest.mark.parametrize("name", ["quadruped12", "humanoid"])
def test_mass_matrix_of_a_floating_robot_does_not_depend_on_where_its_base_is(name):
    """The CRBA refers its quantities to the root of the tree, not to the world origin: referred to the
    origin, the composite inertias of a robot 3 km away are ~m |p|^2 and their differences lose ~1e-8 of M."""
    dyn = Dynamics(load_urdf(bundled_model_path(name), "free_flyer"))
    rng = np.random.default_rng(21)
    for _ in range(3):
        q = dyn.model.random_configuration(rng)
        q[0:3] = 0.0
        here = dyn.mass_matrix(q).copy()
        q[0:3] = [3e3, -2e3, 1e3]
        far = dyn.mass_matrix(q)
        assert np.abs(far - here).max() <= 1e-10 * np.abs(here).max()


def test_mass_matrix_overwrites_every_entry_of_out(dyn):
    """A serial chain's M is written entry by entry without clearing (every DOF is an ancestor or a
    descendant of every other), a branched tree's is cleared first: either way nothing of out survives."""
    q, _, _ = random_state(dyn.model, np.random.default_rng(22))
    nv = dyn.model.nv
    clean = dyn.mass_matrix(q, out=np.zeros((nv, nv))).copy()
    assert np.array_equal(dyn.mass_matrix(q, out=np.full((nv, nv), np.nan)), clean)


def test_aba_with_an_added_joint_inertia_solves_the_augmented_mass_matrix(dyn):
    rng = np.random.default_rng(12)
    model = dyn.model
    for _ in range(5):
        q, v, tau = random_state(model, rng)
        extra = np.where(np.arange(model.nv) >= model.n_base_dofs, rng.uniform(0.0, 2.0, model.nv), 0.0)
        reference = np.linalg.solve(dyn.mass_matrix(q) + np.diag(extra), tau - dyn.nonlinear_effects(q, v))
        qdd = np.zeros(model.nv)
        assert kernels.aba_with_inertia(dyn.mi, dyn.mf, dyn.ws, q, v, tau, extra, qdd) == kernels.OK
        assert close(qdd, reference)
        assert kernels.aba_with_inertia(dyn.mi, dyn.mf, dyn.ws, q, v, tau, extra[1:], qdd) == \
            kernels.WRONG_LENGTH + 5


def test_on_and_on3_forward_dynamics_agree(dyn):
    rng = np.random.default_rng(3)
    for _ in range(5):
        q, v, tau = random_state(dyn.model, rng)
        tau *= 20
        assert close(dyn.forward_dynamics(q, v, tau).copy(), dyn.forward_dynamics_cholesky(q, v, tau))


def test_gravity_forces_are_the_gradient_of_potential_energy():
    dyn = Dynamics(load_urdf(bundled_model_path("arm7")))
    rng = np.random.default_rng(4)
    q = dyn.model.random_configuration(rng)
    zero = np.zeros(dyn.model.nv)
    step = 1e-6
    grad = np.empty(dyn.model.nv)
    for k in range(dyn.model.nv):
        dq = np.zeros(dyn.model.nq)
        dq[k] = step
        grad[k] = (dyn.energy(q + dq, zero)[1] - dyn.energy(q - dq, zero)[1]) / (2 * step)
    assert np.allclose(dyn.gravity_forces(q), grad, rtol=1e-6, atol=1e-7)


def rk4_step(dyn, q, v, dt):
    """Classical RK4 on (q, v) with dq/dt from configuration_rate; the quaternion is renormalised."""
    zero = np.zeros(dyn.model.nv)

    def deriv(q_, v_):
        return dyn.configuration_rate(q_, v_), dyn.forward_dynamics(q_, v_, zero).copy()

    k1q, k1v = deriv(q, v)
    k2q, k2v = deriv(q + 0.5 * dt * k1q, v + 0.5 * dt * k1v)
    k3q, k3v = deriv(q + 0.5 * dt * k2q, v + 0.5 * dt * k2v)
    k4q, k4v = deriv(q + dt * k3q, v + dt * k3v)
    q = q + dt / 6 * (k1q + 2 * k2q + 2 * k3q + k4q)
    v = v + dt / 6 * (k1v + 2 * k2v + 2 * k3v + k4v)
    if dyn.model.has_free_flyer:
        q[3:7] /= np.linalg.norm(q[3:7])
    return q, v


@pytest.mark.parametrize("name,base", [("arm7", None), ("quadruped12", "free_flyer")])
def test_unforced_simulation_conserves_energy(name, base):
    dyn = Dynamics(load_urdf(bundled_model_path(name), base))
    rng = np.random.default_rng(5)
    q = dyn.model.random_configuration(rng)
    v = rng.normal(size=dyn.model.nv)
    e0 = sum(dyn.energy(q, v))
    scale = dyn.energy(q, v)[0] + dyn.model.total_mass * 9.81 * 1.0  # kinetic + m g (1 m)
    drift = 0.0
    for _ in range(1000):
        q, v = rk4_step(dyn, q, v, 1e-3)
        drift = max(drift, abs(sum(dyn.energy(q, v)) - e0))
    assert drift / scale < 1e-7


def test_free_flyer_in_zero_gravity_conserves_momentum():
    """No gravity, no torque: the humanoid's total momentum (the base rows of M v) is constant."""
    model = load_urdf(bundled_model_path("humanoid"), "free_flyer")
    model.set_gravity([0, 0, 0])
    dyn = Dynamics(model)
    rng = np.random.default_rng(6)
    q = model.random_configuration(rng)
    v = rng.normal(size=model.nv)

    def world_momentum(q_, v_):
        # Base rows of M v are the body-frame spatial momentum [linear; angular] about the base origin.
        rot, pos = dyn.forward_kinematics(q_)
        h = dyn.mass_matrix(q_) @ v_
        lin = rot[0] @ h[0:3]
        ang = rot[0] @ h[3:6] + np.cross(pos[0], lin)  # about the world origin
        return np.concatenate([lin, ang])

    p0 = world_momentum(q, v)
    for _ in range(300):
        q, v = rk4_step(dyn, q, v, 1e-3)
    assert np.allclose(world_momentum(q, v), p0, rtol=0, atol=1e-9 * max(1.0, np.abs(p0).max()))


def test_bad_inputs_raise_value_error_naming_the_argument():
    dyn = Dynamics(load_urdf(bundled_model_path("arm7")))
    n = dyn.model.nv
    good = np.zeros(n)
    bad = good.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match=r"^q contains NaN"):
        dyn.inverse_dynamics(bad, good, good)
    with pytest.raises(ValueError, match=r"^v contains NaN"):
        dyn.inverse_dynamics(good, bad, good)
    with pytest.raises(ValueError, match=r"^a contains NaN"):
        dyn.inverse_dynamics(good, good, np.full(n, np.inf))
    with pytest.raises(ValueError, match=r"^tau contains NaN"):
        dyn.forward_dynamics(good, good, bad)
    with pytest.raises(ValueError, match=r"^q must have shape \(7,\)"):
        dyn.mass_matrix(np.zeros(6))
    with pytest.raises(ValueError, match=r"^v must be a numeric vector"):
        dyn.inverse_dynamics(good, ["x"] * n, good)
    with pytest.raises(ValueError, match=r"^f_ext must have shape"):
        dyn.inverse_dynamics(good, good, good, f_ext=np.zeros((3, 6)))
    with pytest.raises(ValueError, match=r"^out must be"):
        dyn.inverse_dynamics(good, good, good, out=np.zeros(n, dtype=np.float32))


def test_python_api_converts_what_numba_refuses_and_checks_outputs():
    """The fast path hands arrays straight to the kernels; anything else is converted (or refused) by name."""
    dyn = Dynamics(load_urdf(bundled_model_path("arm7")))
    n = dyn.model.nv
    rng = np.random.default_rng(7)
    q, v, a = rng.normal(size=n), rng.normal(size=n), rng.normal(size=n)
    tau, mass, acc = dyn.inverse_dynamics(q, v, a), dyn.mass_matrix(q), dyn.forward_dynamics(q, v, a)
    strided = np.zeros(2 * n)
    strided[::2] = v
    for args in [(list(q), v, a), (q, strided[::2], a), (q, v, a.astype(np.float32).astype(np.float64))]:
        expected = tau if args[2] is a else dyn.inverse_dynamics(q, v, args[2])
        assert np.array_equal(dyn.inverse_dynamics(*args), expected)
    assert np.array_equal(dyn.inverse_dynamics(q.astype(int), v, a), dyn.inverse_dynamics(q.astype(int) * 1.0, v, a))
    assert np.array_equal(dyn.mass_matrix(list(q)), mass)
    assert np.array_equal(dyn.forward_dynamics(q, v, tuple(a)), acc)
    out, mat = np.empty(n), np.empty((n, n))
    assert dyn.inverse_dynamics(q, v, a, out=out) is out and np.array_equal(out, tau)
    assert dyn.mass_matrix(q, out=mat) is mat and np.array_equal(mat, mass)
    assert dyn.forward_dynamics(q, v, a, out=out) is out and np.array_equal(out, acc)
    with pytest.raises(ValueError, match=r"^out must have shape \(7,\)"):
        dyn.inverse_dynamics(q, v, a, out=np.empty(n + 1))
    with pytest.raises(ValueError, match=r"^out must have shape \(7, 7\)"):
        dyn.mass_matrix(q, out=np.empty((n, n + 1)))
    with pytest.raises(ValueError, match=r"^out must be a C-contiguous float64 array"):
        dyn.mass_matrix(q, out=np.empty((n, n)).T[:, :])  # Fortran order
    with pytest.raises(ValueError, match=r"^out must be a C-contiguous float64 array"):
        dyn.forward_dynamics(q, v, a, out=np.empty((n, 1)))
    with pytest.raises(ValueError, match=r"^tau must have shape \(7,\)"):
        dyn.forward_dynamics(q, v, np.zeros((n, 1)))


def test_kernels_report_non_finite_inputs_by_status():
    """The hot-path kernels never raise: they return which vector was not finite."""
    dyn = Dynamics(load_urdf(bundled_model_path("arm7")))
    n = dyn.model.nv
    good, bad, out = np.zeros(n), np.full(n, np.nan), np.zeros(n)
    mi, mf, ws = dyn.mi, dyn.mf, dyn.ws
    assert kernels.rnea(mi, mf, ws, good, good, good, out) == 0
    assert kernels.rnea(mi, mf, ws, good, good, bad, out) == 3
    assert kernels.aba(mi, mf, ws, good, bad, good, out) == 2
    assert kernels.crba(mi, mf, ws, bad, np.zeros((n, n))) == 1


def test_singular_euler_configuration_is_reported():
    """At pitch = pi/2 the Euler-angle chain loses a DOF: forward dynamics says so instead of returning junk."""
    dyn = Dynamics(load_urdf(bundled_model_path("quadruped12"), "euler"))
    q = np.zeros(dyn.model.nq)
    q[4] = np.pi / 2
    with pytest.raises(ValueError, match="singular"):
        dyn.forward_dynamics(q, np.zeros(dyn.model.nv), np.zeros(dyn.model.nv))


@pytest.mark.parametrize("name,base", [("quadruped12", "free_flyer"), ("quadruped12", "euler"),
                                       ("humanoid", "free_flyer")])
def test_floating_base_inverse_dynamics_leaves_the_base_unactuated(name, base):
    """Eqs. 26-27: the base rows of M acc + h vanish, the joint rows give tau, and the
    forward dynamics of tau reproduce the commanded joint accelerations."""
    dyn = Dynamics(load_urdf(bundled_model_path(name), base))
    rng = np.random.default_rng(8)
    for _ in range(3):
        q, v, a = random_state(dyn.model, rng)
        tau, acc = dyn.floating_base_inverse_dynamics(q, v, a)
        assert np.all(tau[:6] == 0)
        assert np.array_equal(acc[6:], a[6:])
        full = dyn.mass_matrix(q) @ acc + dyn.nonlinear_effects(q, v)
        assert np.abs(full[:6]).max() < 1e-9 * np.abs(full).max()  # the base is not actuated
        assert close(full[6:], tau[6:])
        assert close(dyn.forward_dynamics(q, v, tau), acc)


def test_floating_base_inverse_dynamics_rejects_a_base_that_is_not_a_prefix():
    dyn = Dynamics(load_urdf(bundled_model_path("quadruped12"), "free_flyer"))
    q = dyn.model.neutral_configuration()
    with pytest.raises(ValueError, match="n_base=4"):
        dyn.floating_base_inverse_dynamics(q, np.zeros(18), np.zeros(18), n_base=4)
