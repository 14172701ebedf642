"""Chen & Wang (1998) extended to planetary trains: any link as carrier, sun or ring (fixed, input or output).

The virtual-link dynamics (G_v + G_s, eq. 23) of a planetary stage on a turning arm is checked against a
Lagrangian written here from scratch: every body's pose from hand-derived Willis kinematics, each of the three
planets separately (spin and orbit), M by polarisation of the kinetic energy, its derivatives and gravity by
complex step. Three roles of the carrier: output (link 2), input (a secondary link carrying the planets) and
fixed (link 1 carries the planets on fixed axes).
"""
import math

import numpy as np
import pytest

from rtctl.plants.geared.model import GearedMechanism
from rtctl.plants.geared.plant import GearedPlant

# Geometry and masses (SI). Link 1 turns about the world z axis (pinion m1 on the base, 15:90); the stage axis is
# the z axis of link 1's D-H frame (horizontal, through (0, 0, H)); the output arm (link 2) is fixed to the stage
# member of angle theta_2 (D-H a = A2, d = D2 from the stage frame).
H, A2, D2 = 0.40, 0.30, 0.05
NS, NP, NR, NM, N1 = 20, 25, 70, 15, 90
RHO = 0.015 + 0.01875                        # sun + planet pitch radii (module 1.5 mm)
LINK1 = dict(mass=3.0, com=[0.0, -0.15, 0.0], inertia=[0.030, 0.012, 0.030, 0.0, 0.0, 0.0])
LINK2 = dict(mass=1.5, com=[-0.15, 0.0, 0.0], inertia=[0.0008, 0.012, 0.012, 0.0, 0.0, 0.0])
MOTOR = dict(mass=0.4, com=[0.08, 0.0, 0.30], axis=[0, 0, 1], axial_inertia=3.0e-4, transverse_inertia=2.0e-4)
SUN = dict(mass=0.3, axial_inertia=2.0e-4, transverse_inertia=1.5e-4)
CARRIER = dict(mass=0.5, axial_inertia=4.0e-4, transverse_inertia=3.0e-4)
PLANET = dict(mass=0.05, axial_inertia=1.0e-5, transverse_inertia=8.0e-6)
ROLES = ("output", "input", "fixed")


def _inertia(six):
    xx, yy, zz, xy, xz, yz = six
    return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])


def mechanism_table(carrier_role):
    """The planetary arm with its carrier as the output link 2, as an input (sun = link 2) or fixed (= link 1,
    ring = link 2); the ring is link 1 unless the carrier is."""
    on_axis = dict(com=[0.0, 0.0, 0.0], axis=[0, 0, 1])
    links = [dict(name="0"), dict(name="1", dh=[0.0, math.pi / 2, H], **LINK1),
             dict(name="2", dh=[A2, 0.0, D2], **LINK2), dict(name="m1", **MOTOR)]
    pairs = [dict(links=["0", "1"], axis="a"), dict(links=["0", "m1"], axis="d"), dict(links=["1", "2"], axis="b")]
    gears = [dict(links=["m1", "1"], teeth=[NM, N1])]
    if carrier_role == "output":         # ring 1, carrier 2, sun s (input), planets on 2
        links += [dict(name="s", **on_axis, **SUN),
                  dict(name="p", com=[RHO - A2, 0.0, -D2], axis=[0, 0, 1], count=3, **PLANET)]
        pairs += [dict(links=["1", "s"], axis="b"), dict(links=["2", "p"], axis="c")]
        gears += [dict(links=["s", "p"], teeth=[NS, NP]), dict(links=["p", "1"], teeth=[NP, NR], kind="internal")]
        inputs = ["m1", "s"]
    elif carrier_role == "input":        # ring 1, sun 2, carrier c (input, secondary), planets on c
        links += [dict(name="c", **on_axis, **CARRIER),
                  dict(name="p", com=[RHO, 0.0, 0.0], axis=[0, 0, 1], count=3, **PLANET)]
        pairs += [dict(links=["1", "c"], axis="b"), dict(links=["c", "p"], axis="c")]
        gears += [dict(links=["2", "p"], teeth=[NS, NP]), dict(links=["p", "1"], teeth=[NP, NR], kind="internal")]
        inputs = ["m1", "c"]
    else:                                # carrier 1, ring 2, sun s (input), planets on fixed axes of link 1
        links += [dict(name="s", **on_axis, **SUN),
                  dict(name="p", com=[RHO, 0.0, 0.0], axis=[0, 0, 1], count=3, **PLANET)]
        pairs += [dict(links=["1", "s"], axis="b"), dict(links=["1", "p"], axis="c")]
        gears += [dict(links=["s", "p"], teeth=[NS, NP]), dict(links=["p", "2"], teeth=[NP, NR], kind="internal")]
        inputs = ["m1", "s"]
    return dict(name=f"planetary_{carrier_role}", base="0", end_effector="2", inputs=inputs, link=links,
                turning_pair=pairs, gear_pair=gears)


def stage_rates(carrier_role):
    """Angles of sun, carrier, ring and planet relative to link 1 per unit theta_2, by hand from Willis'
    equation (s - c) / (r - c) = -NR/NS and the planet mesh (p - c) = (NR/NP) (r - c)."""
    if carrier_role == "output":
        c, r = 1.0, 0.0
        s = c - NR / NS * (r - c)
    elif carrier_role == "input":
        s, r = 1.0, 0.0
        c = s / (1 + NR / NS)
    else:
        c, r = 0.0, 1.0
        s = c - NR / NS * (r - c)
    return dict(s=s, c=c, r=r, p=c + NR / NP * (r - c))


def _rz(t):
    c, s = np.cos(t), np.sin(t)
    return np.array([[c, -s, 0 * c], [s, c, 0 * c], [0 * c, 0 * c, 1 + 0 * c]])


R_ALPHA = np.array([[1.0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]])    # Rx(pi / 2)


GRAVITY = np.array([0.0, 0.0, -9.81])


def energies(carrier_role, q, qd, gravity=GRAVITY):
    """(T, V) of every body of the planetary arm (complex-safe in q)."""
    k = stage_rates(carrier_role)
    z = np.array([0.0, 0.0, 1.0])
    R1, o1 = _rz(q[0]) @ R_ALPHA, np.array([0.0, 0.0, H])
    w1 = z * qd[0]
    T, V = 0.0, 0.0

    def add(m, p, v, w, I_world):
        nonlocal T, V
        T = T + 0.5 * m * (v @ v) + 0.5 * (w @ I_world @ w)
        V = V - m * (gravity @ p)

    def stage_body(m, x0, inertia, angle, rate, orbit_angle=None, orbit_rate=None):
        """A body turning about the stage axis by ``angle``; its com orbits by ``orbit_angle`` (default: the same)."""
        oa, orate = (angle, rate) if orbit_angle is None else (orbit_angle, orbit_rate)
        x = _rz(oa) @ x0
        p = o1 + R1 @ x
        v = np.cross(w1, p) + R1 @ np.cross(z * orate, x)
        Rb = R1 @ _rz(angle)
        add(m, p, v, w1 + R1 @ z * rate, Rb @ inertia @ Rb.T)

    def rotor(d):
        return np.diag([d["transverse_inertia"], d["transverse_inertia"], d["axial_inertia"]])

    stage_body(LINK1["mass"], np.array(LINK1["com"]), _inertia(LINK1["inertia"]), 0.0, 0.0)
    stage_body(LINK2["mass"], np.array([A2, 0.0, D2]) + LINK2["com"], _inertia(LINK2["inertia"]), q[1], qd[1])
    motor_rate = -N1 / NM * qd[0]                                          # m1 -- 1 external mesh
    T = T + 0.5 * MOTOR["axial_inertia"] * motor_rate ** 2                 # a rotor on a fixed axis
    V = V - MOTOR["mass"] * (gravity @ np.array(MOTOR["com"]))
    secondary = CARRIER if carrier_role == "input" else SUN
    member = "c" if carrier_role == "input" else "s"
    stage_body(secondary["mass"], np.zeros(3), rotor(secondary), k[member] * q[1], k[member] * qd[1])
    for j in range(3):
        x0 = _rz(2 * math.pi * j / 3) @ np.array([RHO, 0.0, 0.0])
        stage_body(PLANET["mass"], x0, rotor(PLANET), k["p"] * q[1], k["p"] * qd[1],
                   k["c"] * q[1], k["c"] * qd[1])
    return T, V


def lagrangian_terms(carrier_role, q, qd, h=1e-30):
    """M, c (Coriolis and centrifugal) and g of the Lagrangian of ``energies``."""
    n = 2
    eye = np.eye(n)

    def mass(qq):
        t = [energies(carrier_role, qq, eye[r])[0] for r in range(n)]
        M = np.zeros((n, n), dtype=np.result_type(qq, float))
        for r in range(n):
            M[r, r] = 2 * t[r]
            for k in range(r + 1, n):
                M[r, k] = M[k, r] = energies(carrier_role, qq, eye[r] + eye[k])[0] - t[r] - t[k]
        return M

    dM, g = np.zeros((n, n, n)), np.zeros(n)
    for j in range(n):
        qc = q.astype(complex)
        qc[j] += 1j * h
        dM[j] = mass(qc).imag / h
        g[j] = energies(carrier_role, qc, np.zeros(n))[1].imag / h
    c = np.einsum("hrk,h,k->r", dM, qd, qd) - 0.5 * np.einsum("rhk,h,k->r", dM, qd, qd)
    return mass(q).real, c, g


@pytest.fixture(scope="module", params=ROLES)
def role(request):
    mech = GearedMechanism.from_dict(mechanism_table(request.param))
    return request.param, mech, mech.dynamics()


def test_willis_equation_and_structure_matrix(role):
    carrier_role, mech, _ = role
    k = stage_rates(carrier_role)
    member = "c" if carrier_role == "input" else "s"
    assert mech.primary == ["0", "1", "2"]
    # the relative rates the graph analysis solved (eqs. 9-11) against Willis by hand
    np.testing.assert_allclose(mech.b[member], [0.0, k[member]], rtol=1e-15)
    np.testing.assert_allclose(mech.b["m1"], [-N1 / NM, 0.0], rtol=1e-15)
    planet_relative = k["p"] - (k["c"] if carrier_role != "fixed" else 0.0)
    expected = {"output": [0.0, planet_relative], "input": [0.0, k["p"] - k["c"]], "fixed": [0.0, k["p"]]}
    np.testing.assert_allclose(mech.b["p"], expected[carrier_role], rtol=1e-14)
    rates = dict(s=k["s"], c=k["c"], r=k["r"])
    assert (rates["s"] - rates["c"]) / (rates["r"] - rates["c"]) == pytest.approx(-NR / NS, rel=1e-15)
    np.testing.assert_allclose(mech.A, np.diag([-N1 / NM, k[member]]), rtol=1e-15)


@pytest.mark.parametrize("fixed, driver, driven, ratio", [
    ("r", "s", "c", 1 + NR / NS), ("r", "c", "s", 1 / (1 + NR / NS)),
    ("s", "r", "c", 1 + NS / NR), ("s", "c", "r", 1 / (1 + NS / NR)),
    ("c", "s", "r", -NR / NS), ("c", "r", "s", -NS / NR),
])
def test_single_stage_on_its_fixed_member(fixed, driver, driven, ratio):
    """A bare stage whose fixed member is the base link itself (the gear pair with the base found its carrier):
    input rate / output rate is Willis' ratio, and M is the sum of I x (rate ratio)^2 over sun, carrier, ring and
    planets (spin and orbit) -- a fixed vertical axis: no bias."""
    names = {"s": "sun", "c": "carrier", "r": "ring"}
    free = [x for x in "scr" if x != fixed]
    inertia = dict(s=2e-4, c=4e-4, r=9e-4)
    links = [dict(name=names[fixed])]
    pairs = []
    for x in free:
        kw = dict(dh=[0.0, 0.0, 0.0], inertia=[inertia[x] / 2, inertia[x] / 2, inertia[x], 0, 0, 0]) if x == driven else \
            dict(axis=[0, 0, 1], axial_inertia=inertia[x])
        links.append(dict(name=names[x], mass=0.2, **kw))
        pairs.append(dict(links=[names[fixed], names[x]], axis="a"))
    on = names["c"]
    links.append(dict(name="planet", mass=0.05, com=[RHO, 0, 0], axis=[0, 0, 1], axial_inertia=1e-5,
                      transverse_inertia=8e-6, count=3))
    pairs.append(dict(links=[on, "planet"], axis="b"))
    gears = [dict(links=[names["s"], "planet"], teeth=[NS, NP]),
             dict(links=["planet", names["r"]], teeth=[NP, NR], kind="internal")]
    mech = GearedMechanism.from_dict(dict(base=names[fixed], end_effector=names[driven], inputs=[names[driver]],
                                          link=links, turning_pair=pairs, gear_pair=gears))
    assert mech.A[0, 0] == pytest.approx(ratio, rel=1e-14)
    rate = {fixed: 0.0, driven: 1.0, driver: ratio}                  # per unit output rate
    planet = rate["c"] + NR / NP * (rate["r"] - rate["c"])
    M = sum(inertia[x] * rate[x] ** 2 for x in free) + 3 * (1e-5 * planet ** 2 + 0.05 * RHO ** 2 * rate["c"] ** 2)
    dyn = mech.dynamics()
    q = np.array([0.7])
    np.testing.assert_allclose(dyn.mass_matrix(q), [[M]], rtol=1e-13)
    np.testing.assert_allclose(dyn.inverse_dynamics(q, np.array([3.0]), np.zeros(1)), 0.0, atol=1e-15)


def test_virtual_link_equals_lagrangian_of_every_body(role):
    """M, the bias C + g and the inverse dynamics of eq. 23 vs the hand-built Lagrangian at random states: 1e-9
    (N m, kg m^2)."""
    carrier_role, mech, dyn = role
    rng = np.random.default_rng(11)
    worst = 0.0
    for _ in range(8):
        q, qd, qdd = rng.uniform(-math.pi, math.pi, 2), rng.uniform(-4, 4, 2), rng.uniform(-10, 10, 2)
        M, c, g = lagrangian_terms(carrier_role, q, qd)
        np.testing.assert_allclose(dyn.mass_matrix(q), M, rtol=0, atol=1e-9)
        np.testing.assert_allclose(dyn.inverse_dynamics(q, qd, np.zeros(2)), c + g, rtol=0, atol=1e-9)
        tau = dyn.inverse_dynamics(q, qd, qdd)
        np.testing.assert_allclose(tau, M @ qdd + c + g, rtol=0, atol=1e-9)
        np.testing.assert_allclose(dyn.forward_dynamics(q, qd, tau), qdd, rtol=0, atol=1e-8)
        worst = max(worst, float(np.abs(tau - M @ qdd - c - g).max()))
        assert np.abs(c).max() > 1e-3              # the arm's turning couples the stage: a real bias to check
    print(f"\ncarrier as {carrier_role}: max |tau - tau_Lagrange| = {worst:.1e} N m over 8 random states")


def test_planet_gyroscopic_coupling_is_in_gs(role):
    """Dropping G_s (the stage treated as rigid on its links) misses the sun / carrier / planet spin: the error
    is the rotors' share of the mass matrix, larger than 1 % of it for every role."""
    from rtctl.dynamics import Dynamics
    _, mech, dyn = role
    q = np.array([0.3, -0.4])
    full = dyn.mass_matrix(q)
    rigid = Dynamics(mech.virtual_model()).mass_matrix(q)
    assert np.linalg.norm(full - rigid) > 0.01 * np.linalg.norm(full)


@pytest.mark.slow
def test_free_stage_conserves_energy_under_the_plant(role):
    """Unforced, frictionless: T + V (the hand-built energies) stays constant over 1 s of the plant's RK4 at
    1 kHz, and the plant's own energy report equals them."""
    carrier_role, mech, _ = role
    plant = GearedPlant(mech.virtual_model(), GearedPlant.Options(substeps=2), mechanism=mech)
    q0, v0 = np.array([0.2, 0.9]), np.array([1.5, -3.0])
    plant.reset(q0, v0)
    e0 = sum(energies(carrier_role, q0, v0))
    zero = np.zeros(2)
    drift = 0.0
    for _ in range(1000):
        plant.step(1e-3, zero)
        e = sum(energies(carrier_role, plant.q, plant.v))
        drift = max(drift, abs(e - e0))
    assert sum(plant.energy()) == pytest.approx(e, abs=1e-12)
    print(f"\ncarrier as {carrier_role}: |E - E0| <= {drift:.1e} J of E0 = {e0:.3f} J over 1 s")
    assert drift < 1e-7 * abs(e0)
    assert np.abs(plant.q - q0).max() > 0.5        # it moved
