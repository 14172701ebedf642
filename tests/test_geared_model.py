"""Chen & Wang (1998): GRM structure analysis, virtual-link dynamics, paper closed forms, brute-force check."""
import math

import numpy as np
import pytest

from rtctl.dynamics import Dynamics
from rtctl.plants.geared.model import GRM3_PARAMETERS, GearedMechanism, GearedMechanismError, grm3, grm3_ratios
from rtctl.plants.geared.reference import axes_in_frame, brute_force_dynamics, gs_reference, secondary_terms

RNG = np.random.default_rng(2024)


@pytest.fixture(scope="module")
def mech():
    return grm3()


@pytest.fixture(scope="module")
def grm(mech):
    return mech.dynamics()


def random_state(n=3, rng=RNG):
    return rng.uniform(-math.pi, math.pi, n), rng.uniform(-3, 3, n), rng.uniform(-5, 5, n)


# ------------------------------------------------------------------ structure (section 2, eqs. 9-12)
def test_structure_of_section_7(mech):
    assert mech.primary == ["0", "1", "2", "3"]                        # Fig. 3 EOLC
    assert sorted(mech.secondary) == ["4", "5", "6", "7"]
    assert mech.carrier == {"4": 0, "5": 0, "6": 1, "7": 2}            # section 2
    canon = {(p, c): lab for p, c, lab in mech.canonical_edges}
    assert canon[("0", "5")] == "a" and canon[("1", "6")] == "b"       # Fig. 2(b): 5, 6 moved down
    assert ("1", "5") not in canon and ("2", "6") not in canon
    assert mech.gear_carrier == {("4", "1"): "0", ("5", "2"): "1", ("6", "7"): "2", ("7", "3"): "2"}
    assert len(mech.circuit_equations) == 4 and len(mech.coaxial_conditions) == 2
    assert "q_5,1 = q_0,1 + q_5,0" in mech.coaxial_conditions[0]       # eq. 10 form


def test_b_coefficients_and_A_eqs_27_30_45(mech):
    g = grm3_ratios()
    np.testing.assert_allclose(mech.b["4"], [g["g14"], 0, 0], atol=1e-15)              # (27)
    np.testing.assert_allclose(mech.b["5"], [1, g["g25"], 0], atol=1e-15)              # (28)
    np.testing.assert_allclose(mech.b["6"], [0, 1, g["g76"] * g["g37"]], atol=1e-15)   # (29)
    np.testing.assert_allclose(mech.b["7"], [0, 0, g["g37"]], atol=1e-15)              # (30)
    A45 = np.array([[g["g14"], 1, 0], [0, g["g25"], 1], [0, 0, g["g76"] * g["g37"]]])
    np.testing.assert_allclose(mech.A, A45, atol=1e-15)                                # (45)


def test_table2_axes_and_derivatives(mech):
    q = RNG.uniform(-3, 3, 3)
    s2, c2, s3, c3 = math.sin(q[1]), math.cos(q[1]), math.sin(q[2]), math.cos(q[2])
    z2, dz2 = axes_in_frame(mech, q, 2)
    z3, dz3 = axes_in_frame(mech, q, 3)
    np.testing.assert_allclose(z2[1], [s2, c2, 0], atol=1e-14)
    np.testing.assert_allclose(z2[2], [0, 0, 1], atol=1e-14)
    np.testing.assert_allclose(dz2[1, 2], [c2, -s2, 0], atol=1e-14)
    np.testing.assert_allclose(z3[1], [s2 * c3 + c2 * s3, 0, s2 * s3 - c2 * c3], atol=1e-14)
    np.testing.assert_allclose(dz3[1, 2], [c2 * c3 - s2 * s3, 0, c2 * s3 + s2 * c3], atol=1e-14)
    np.testing.assert_allclose(dz3[1, 3], [-s2 * s3 + c2 * c3, 0, s2 * c3 + c2 * s3], atol=1e-14)
    np.testing.assert_allclose(dz3[2, 3], 0, atol=1e-14)


# ------------------------------------------------------------------ closed forms (eqs. 31-45)
def test_paper_closed_forms_at_random_values():
    """M_4/0, M_5/0, M_6/1, M_7/2, C_7/2 (eqs. 31-43), G_s (eq. 44; its 'theta_2''' means theta'') and A (45)
    equal the general code at random numeric values of every symbol."""
    rng = np.random.default_rng(7)
    for _ in range(5):
        teeth = {k: int(rng.integers(10, 120)) for k in GRM3_PARAMETERS["teeth"]}
        signs = {k: int(rng.choice([-1, 1])) for k in GRM3_PARAMETERS["signs"]}
        I4, I5, I6, I7 = rng.uniform(1e-5, 1e-2, 4)
        p = GRM3_PARAMETERS
        over = dict(teeth=teeth, signs=signs, d1=rng.uniform(0.1, 1), a2=rng.uniform(0.1, 1),
                    s4=(*p["s4"][:3], I4, p["s4"][4]), s5=(*p["s5"][:3], I5, p["s5"][4]),
                    s6=(*p["s6"][:3], I6, p["s6"][4]), s7=(*p["s7"][:3], I7, p["s7"][4]))
        m = grm3(**over)
        g = grm3_ratios(dict(teeth=teeth, signs=signs))
        g14, g25, g76, g37 = g["g14"], g["g25"], g["g76"], g["g37"]
        q, qd, qdd = random_state(rng=rng)
        S2, C2 = math.sin(q[1]), math.cos(q[1])
        M40, C40 = secondary_terms(m, "4", q)
        np.testing.assert_allclose(M40, I4 * np.diag([g14 ** 2, 0, 0]), rtol=1e-13, atol=1e-16)     # (31)
        M50, C50 = secondary_terms(m, "5", q)
        np.testing.assert_allclose(M50, I5 * np.array([[1, g25, 0], [g25, g25 ** 2, 0], [0, 0, 0]]), rtol=1e-13)  # (32)
        np.testing.assert_array_equal(C40, 0)
        np.testing.assert_array_equal(C50, 0)                                                        # (33)
        M61, C61 = secondary_terms(m, "6", q)
        b63 = g76 * g37
        np.testing.assert_allclose(M61, I6 * np.array([[0, 0, 0], [0, 1, b63], [0, b63, b63 ** 2]]),
                                   rtol=1e-13, atol=1e-16)                                           # (35)
        np.testing.assert_allclose(C61, 0, atol=1e-16)                                              # (36, 37)
        M72, C72 = secondary_terms(m, "7", q)
        np.testing.assert_allclose(M72, I7 * np.array([[0, 0, g37 * S2], [0, 0, 0], [g37 * S2, 0, g37 ** 2]]),
                                   rtol=1e-12, atol=1e-16)                                           # (39)
        k = g37 * C2
        np.testing.assert_allclose(C72[0], 0.5 * I7 * np.array([[0, 0, 0], [0, 0, k], [0, k, 0]]), atol=1e-16)   # (40)
        np.testing.assert_allclose(C72[1], -0.5 * I7 * np.array([[0, 0, k], [0, 0, 0], [k, 0, 0]]), atol=1e-16)  # (41)
        np.testing.assert_allclose(C72[2], 0.5 * I7 * np.array([[0, k, 0], [k, 0, 0], [0, 0, 0]]), atol=1e-16)   # (42)
        c72 = np.array([qd @ C72[r] @ qd for r in range(3)])   # (43): 'theta_2-dot^T C theta_2-dot' means theta-dot
        np.testing.assert_allclose(c72, I7 * k * np.array([qd[1] * qd[2], -qd[0] * qd[2], qd[0] * qd[1]]),
                                   rtol=1e-12, atol=1e-16)
        Ms44 = np.array([[I4 * g14 ** 2 + I5, I5 * g25, I7 * g37 * S2],
                         [I5 * g25, I5 * g25 ** 2 + I6, I6 * b63],
                         [I7 * g37 * S2, I6 * b63, I6 * b63 ** 2 + I7 * g37 ** 2]])
        Gs44 = Ms44 @ qdd + I7 * k * np.array([qd[1] * qd[2], -qd[0] * qd[2], qd[0] * qd[1]])       # (44)
        gs_ref, _, _ = gs_reference(m, q, qd, qdd)
        gs_fast, _, _ = m.dynamics().gs(q, qd, qdd)
        np.testing.assert_allclose(gs_ref, Gs44, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(gs_fast, Gs44, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(m.A, [[g14, 1, 0], [0, g25, 1], [0, 0, b63]], rtol=1e-15)        # (45)


# ------------------------------------------------------------------ independent cross-check
def test_virtual_link_equals_brute_force_lagrangian(mech, grm):
    """(M_v + M_s) qdd + C_v + C_s + g vs the Lagrangian of all 8 links (complex-step derivatives): 1e-9."""
    worst = 0.0
    for _ in range(10):
        q, qd, qdd = random_state()
        tau_bf, M_bf, c_bf, g_bf = brute_force_dynamics(mech, q, qd, qdd)
        tau = grm.inverse_dynamics(q, qd, qdd)
        np.testing.assert_allclose(tau, tau_bf, rtol=0, atol=1e-9)
        np.testing.assert_allclose(grm.mass_matrix(q), M_bf, rtol=0, atol=1e-9)
        worst = max(worst, np.abs(tau - tau_bf).max())
    print(f"\nvirtual-link ID vs brute-force Lagrangian: max |dtau| = {worst:.2e} N m over 10 random states")


def test_case_tables_equal_compact_kernel(mech, grm):
    for _ in range(10):
        q, qd, qdd = random_state()
        ref, Ms_ref, Cs_ref = gs_reference(mech, q, qd, qdd)
        fast, Ms, Cs = grm.gs(q, qd, qdd)
        np.testing.assert_allclose(Ms, Ms_ref, atol=1e-15)
        np.testing.assert_allclose(Cs, Cs_ref, atol=1e-14)
        np.testing.assert_allclose(Ms, Ms.T, atol=0)     # eq. 17: symmetric
        for s in mech.secondary:                          # eqs. 19-20: no centrifugal terms (zero diagonals)
            _, C = secondary_terms(mech, s, q)
            assert np.all(np.diagonal(C, axis1=1, axis2=2) == 0)
            np.testing.assert_allclose(C, np.transpose(C, (0, 2, 1)), atol=0)


def test_forward_dynamics_inverts_inverse_and_actuator_space(grm, mech):
    for _ in range(5):
        q, qd, qdd = random_state()
        xi = grm.actuator_inverse_dynamics(q, qd, qdd)
        np.testing.assert_allclose(mech.A @ xi, grm.inverse_dynamics(q, qd, qdd), atol=1e-12)   # eq. 22
        np.testing.assert_allclose(grm.actuator_forward_dynamics(q, qd, xi), qdd, atol=1e-9)
    # Power balance: phi-dot = A^T theta-dot (eq. 12) => xi . phi-dot = tau . theta-dot
    q, qd, qdd = random_state()
    assert np.isclose(grm.actuator_inverse_dynamics(q, qd, qdd) @ (mech.A.T @ qd), grm.inverse_dynamics(q, qd, qdd) @ qd)


def test_dropping_gs_error_is_large(mech, grm):
    """The paper's point: treating the arm as direct drive (G_v only) misses G_s. Measured in input torques
    xi = A^-1 tau against the dynamic (non-gravity) part of the exact xi, and on the mass matrix."""
    core = Dynamics(mech.virtual_model())
    rel, rel_m = [], []
    for _ in range(50):
        q, qd, qdd = random_state()
        full = grm.inverse_dynamics(q, qd, qdd)
        err = full - core.inverse_dynamics(q, qd, qdd)
        gs, Ms, _ = grm.gs(q, qd, qdd)
        np.testing.assert_allclose(err, gs, atol=1e-12)
        dyn_part = full - core.gravity_forces(q)
        rel.append(np.linalg.norm(mech.A_inv @ err) / np.linalg.norm(mech.A_inv @ dyn_part))
        rel_m.append(np.linalg.norm(Ms) / np.linalg.norm(grm.mass_matrix(q)))
    print(f"\ndropping G_s: input-torque error |A^-1 G_s| / |A^-1 (tau - g)|: median {np.median(rel):.1%}, "
          f"max {max(rel):.1%}; |M_s|_F / |M_v + M_s|_F median {np.median(rel_m):.1%}")
    assert np.median(rel) > 0.02 and np.median(rel_m) > 0.05   # measured: ~4 % and ~8 % (GRM3_PARAMETERS)


# ------------------------------------------------------------------ description I/O and refusals
def _desc():
    L = lambda name, **kw: dict(name=name, **kw)  # noqa: E731
    return dict(
        name="toy", base="0", end_effector="2", inputs=["3", "4"],
        link=[L("0"), L("1", mass=1.0, com=[0.1, 0, 0], inertia=[0.01, 0.01, 0.01, 0, 0, 0], dh=[0.3, 0.0, 0.0]),
              L("2", mass=0.5, com=[0.1, 0, 0], inertia=[0.005, 0.005, 0.005, 0, 0, 0], dh=[0.2, 0.0, 0.0]),
              L("3", mass=0.2, axis=[0, 0, 1], axial_inertia=1e-4, com=[0.05, 0.05, 0]),
              L("4", mass=0.2, axis=[0, 0, 1], axial_inertia=1e-4)],
        turning_pair=[dict(links=["0", "1"], axis="a"), dict(links=["1", "2"], axis="b"),
                      dict(links=["0", "3"], axis="c"), dict(links=["1", "4"], axis="a")],
        gear_pair=[dict(links=["3", "1"], teeth=[10, 50]), dict(links=["4", "2"], teeth=[20, 40])],
    )


def test_toml_description_and_canonicalisation(tmp_path):
    import json
    d = _desc()
    m = GearedMechanism.from_dict(d)
    assert m.carrier == {"3": 0, "4": 0} and m.gear_carrier[("4", "2")] == "1"
    np.testing.assert_allclose(m.b["4"], [1.0, -2.0])
    lines = ["[mechanism]", 'name = "toy"', 'base = "0"', 'end_effector = "2"', 'inputs = ["3", "4"]']
    for key in ("link", "turning_pair", "gear_pair"):
        for item in d[key]:
            lines.append(f"[[mechanism.{key}]]")
            lines += [f"{k} = {json.dumps(v)}" for k, v in item.items()]
    path = tmp_path / "toy.toml"
    path.write_text("\n".join(lines))
    m2 = GearedMechanism.from_toml(path)
    np.testing.assert_allclose(m2.A, m.A)
    q, qd, qdd = random_state(2)
    np.testing.assert_allclose(m2.dynamics().inverse_dynamics(q, qd, qdd), brute_force_dynamics(m, q, qd, qdd)[0],
                               atol=1e-9)


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["turning_pair"].pop(2), "link '3' is not connected"),
    (lambda d: d["gear_pair"].__setitem__(0, dict(links=["3", "2"], teeth=[20, 40])), "gear pair 3-2: no carrier"),
    (lambda d: d.__setitem__("inputs", ["3"]), "but 1 inputs"),
    (lambda d: d["gear_pair"].pop(), "but 2 inputs"),
    (lambda d: d["turning_pair"].__setitem__(1, dict(links=["1", "2"], axis="a")) or
     d["turning_pair"].__setitem__(0, dict(links=["0", "1"], axis="b")) or
     d["turning_pair"].__setitem__(3, dict(links=["1", "4"], axis="b")) or
     d["link"].append(dict(name="5", dh=[0.1, 0, 0])) or d["turning_pair"].append(dict(links=["2", "5"], axis="b")) or
     d.__setitem__("end_effector", "5") or d["gear_pair"].append(dict(links=["4", "5"], teeth=[1, 1])),
     "cannot be canonicalised"),
    (lambda d: d["gear_pair"].__setitem__(0, dict(links=["3", "1"], teeth=[10, 50], kind="bevel")), "gear pair 3-1"),
    (lambda d: d["link"][3].pop("axis"), "secondary link '3'"),
])
def test_invalid_descriptions_are_refused(mutate, message):
    d = _desc()
    mutate(d)
    with pytest.raises(GearedMechanismError, match=message):
        GearedMechanism.from_dict(d)
