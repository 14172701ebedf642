"""Operation counts of the generalized-momentum Coriolis matrices (Lopes 2009, Table 1).

Method (instrumented evaluation): the very source of the compiled kernels
(:mod:`rtctl.plants.stewart.kernels`) is loaded a second time as plain
Python with ``COUNTING = True`` and run on object arrays of :class:`Counted`
scalars, which count every addition/subtraction, multiplication and division
whose operands depend on the inputs (x, xd). Operations between constants
(parameters, structural zeros and ones of K, J_A, skew matrices) are folded,
and ``x * 0``, ``x * 1``, ``x + 0`` and negation are free -- what a symbolic
count of the expanded expressions (the paper used Maple) also skips. Square
roots and the six sines/cosines of the Euler angles are counted separately
(the paper reports additions, multiplications and divisions only).

Two computations are counted. :func:`count_paper` evaluates the paper's
formulas as printed (eqs. 4, 9, 17, 19, 23, 28, 30-31, 36-40, 46, 48-52, 58,
62, 68, 70, 76): every matrix product written out in the equations, the time
derivatives by the product rule, nothing shared between rows -- the same
computation Table 1 counts, up to how Maple formed its expressions (which the
paper does not show). :func:`count_coriolis` counts the compiled kernels.

Each Table 1 row is counted in isolation: the Coriolis matrix of that body
alone, from (x, xd), including the kinematics it needs (R, J_A, J_A-dot, the
leg's J_D, ...). The totals are platform + 6 x (the four leg rows), as in the
paper; :func:`count_shared` also counts one evaluation of all 25 matrices
with the leg kinematics shared between a leg's four bodies, which is what the
compiled model actually executes.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from . import kernels as _KP

_SRC = Path(__file__).with_name("kernels.py")

# Lopes 2009, Table 1 (Add., Mul., Div.) per method.
PAPER_TABLE1 = {
    "rows": ["platform", "cylinder_translation", "cylinder_rotation", "piston_translation", "piston_rotation",
             "total"],
    "lagrange": [(485, 719, 0), (2982, 5483, 7), (5433, 9215, 8), (2985, 5483, 7), (5433, 9215, 8),
                 (101483, 177095, 80)],
    "koditschek": [(474, 735, 0), (2389, 4283, 7), (3908, 6765, 8), (2392, 4283, 7), (3908, 6765, 8),
                   (76056, 133311, 180)],
    "generalized_momentum": [(182, 326, 0), (238, 533, 4), (471, 942, 8), (241, 533, 4), (471, 942, 8),
                             (8708, 18026, 144)],
}


class Counter:
    __slots__ = ("add", "mul", "div", "sqrt", "trig")

    def __init__(self):
        self.add = self.mul = self.div = self.sqrt = self.trig = 0

    def as_tuple(self):
        return self.add, self.mul, self.div


class Counted:
    """A float that counts the arithmetic done on it (see the module docstring for the rules)."""

    __slots__ = ("v", "c")

    def __init__(self, v, c: Counter):
        self.v, self.c = float(v), c

    def _new(self, v):
        return Counted(v, self.c)

    # addition / subtraction
    def __add__(self, o):
        if isinstance(o, Counted):
            self.c.add += 1
            return self._new(self.v + o.v)
        if o == 0:
            return self
        self.c.add += 1
        return self._new(self.v + o)

    __radd__ = __add__

    def __sub__(self, o):
        if isinstance(o, Counted):
            self.c.add += 1
            return self._new(self.v - o.v)
        if o == 0:
            return self
        self.c.add += 1
        return self._new(self.v - o)

    def __rsub__(self, o):
        if o == 0:
            return self._new(-self.v)
        self.c.add += 1
        return self._new(o - self.v)

    def __neg__(self):
        return self._new(-self.v)

    # multiplication / division
    def __mul__(self, o):
        if isinstance(o, Counted):
            self.c.mul += 1
            return self._new(self.v * o.v)
        if o == 0:
            return 0.0
        if o == 1:
            return self
        if o == -1:
            return self._new(-self.v)
        self.c.mul += 1
        return self._new(self.v * o)

    __rmul__ = __mul__

    def __truediv__(self, o):
        if not isinstance(o, Counted) and o == 1:
            return self
        self.c.div += 1
        return self._new(self.v / (o.v if isinstance(o, Counted) else o))

    def __rtruediv__(self, o):
        if o == 0:
            return 0.0
        self.c.div += 1
        return self._new(o / self.v)

    # functions numpy dispatches to for object arrays
    def sqrt(self):
        self.c.sqrt += 1
        return self._new(np.sqrt(self.v))

    def sin(self):
        self.c.trig += 1
        return self._new(np.sin(self.v))

    def cos(self):
        self.c.trig += 1
        return self._new(np.cos(self.v))

    def __float__(self):
        return self.v

    # comparisons (pivot tests of a factorisation) are free and compare the values
    def __gt__(self, o):
        return self.v > float(o)

    def __lt__(self, o):
        return self.v < float(o)


def _counting_kernels():
    spec = importlib.util.spec_from_file_location("rtctl.plants.stewart.kernels_counting", _SRC)
    mod = importlib.util.module_from_spec(spec)
    mod.COUNTING = True
    spec.loader.exec_module(mod)
    return mod


_KC = None


def _run(mech, x, xd, bodies: int, legs: int, what: int) -> tuple[Counter, np.ndarray, np.ndarray]:
    global _KC
    if _KC is None:
        _KC = _counting_kernels()
    k = _KC
    c = Counter()
    xs = np.array([Counted(v, c) for v in x], dtype=object)
    xds = np.array([Counted(v, c) for v in xd], dtype=object)
    M = np.full((6, 6), 0.0, dtype=object)
    V = np.full((6, 6), 0.0, dtype=object)
    G = np.full(6, 0.0, dtype=object)
    wk = np.full((k.NWK, 6, 6), 0.0, dtype=object)
    wv = np.full((k.NWV, 6), 0.0, dtype=object)
    pts = mech.pts.astype(object)
    par = mech.par.astype(object)
    k.gm_matrices(pts, par, xs, xds, bodies, legs, what, M, V, G, wk, wv)
    to_float = np.vectorize(float, otypes=[float])
    return c, to_float(M), to_float(V)


ROW_BITS = {"platform": 1, "cylinder_translation": 2, "cylinder_rotation": 4, "piston_translation": 8,
            "piston_rotation": 16}


def count_coriolis(mech, x=None, xd=None) -> dict:
    """Per-row counts {row: (add, mul, div, sqrt, trig)} and 'total' (platform + 6 x legs), plus the
    V matrices evaluated on the way (row -> V), for checking them against the compiled kernel."""
    rng = np.random.default_rng(7)
    x = mech.home + 0.05 * rng.standard_normal(6) if x is None else np.asarray(x, float)
    xd = rng.standard_normal(6) if xd is None else np.asarray(xd, float)
    out, mats = {}, {}
    for row, bit in ROW_BITS.items():
        c, _, V = _run(mech, x, xd, bit, 1, 2)   # W_CORIOLIS only, leg 0 for the per-leg rows
        out[row] = (c.add, c.mul, c.div, c.sqrt, c.trig)
        mats[row] = V
    legs = [out[r] for r in ROW_BITS if r != "platform"]
    out["total"] = tuple(out["platform"][j] + 6 * sum(r[j] for r in legs) for j in range(5))
    return {"counts": out, "V": mats, "x": x, "xd": xd}


def count_shared(mech, x=None, xd=None) -> tuple:
    """(add, mul, div, sqrt, trig) of one evaluation of the full V (all bodies, shared leg kinematics)."""
    rng = np.random.default_rng(7)
    x = mech.home + 0.05 * rng.standard_normal(6) if x is None else np.asarray(x, float)
    xd = rng.standard_normal(6) if xd is None else np.asarray(xd, float)
    c, _, _ = _run(mech, x, xd, 31, 63, 2)
    return c.add, c.mul, c.div, c.sqrt, c.trig


# -- the paper's computation: eqs. 4-76 evaluated as printed ------------------------------------------------
def _zeros(*shape):
    return np.full(shape, 0.0, dtype=object)


def _skew_obj(a):
    """a~ of eq. 38 with structural zeros."""
    S = _zeros(3, 3)
    S[0, 1], S[0, 2], S[1, 0], S[1, 2], S[2, 0], S[2, 1] = -a[2], a[1], a[2], -a[0], -a[1], a[0]
    return S


def _blocks(a, b, c, d):
    out = _zeros(6, 6)
    out[:3, :3], out[:3, 3:], out[3:, :3], out[3:, 3:] = a, b, c, d
    return out


def _paper_euler(x, xd):
    """R (eq. 4) as the product Rz(psi) Ry(theta) Rx(phi), J_A (eq. 9), its time derivative by the product
    rule, T = diag(1, J_A) (eq. 23), T-dot, and [v; omega] = T xd (eq. 8)."""
    cps, sps, cth, sth, cph, sph = (np.cos(x[3]), np.sin(x[3]), np.cos(x[4]), np.sin(x[4]), np.cos(x[5]),
                                    np.sin(x[5]))
    rz, ry, rx = _zeros(3, 3), _zeros(3, 3), _zeros(3, 3)
    rz[0, 0], rz[0, 1], rz[1, 0], rz[1, 1], rz[2, 2] = cps, -sps, sps, cps, 1.0
    ry[0, 0], ry[0, 2], ry[1, 1], ry[2, 0], ry[2, 2] = cth, sth, 1.0, -sth, cth
    rx[0, 0], rx[1, 1], rx[1, 2], rx[2, 1], rx[2, 2] = 1.0, cph, -sph, sph, cph
    R = rz @ ry @ rx
    JA, JAd = _zeros(3, 3), _zeros(3, 3)
    JA[0, 1], JA[0, 2], JA[1, 1], JA[1, 2], JA[2, 0], JA[2, 2] = -sps, cth * cps, cps, cth * sps, 1.0, -sth
    psd, thd = xd[3], xd[4]
    JAd[0, 1] = -cps * psd
    JAd[0, 2] = -sth * thd * cps - cth * sps * psd
    JAd[1, 1] = -sps * psd
    JAd[1, 2] = -sth * thd * sps + cth * cps * psd
    JAd[2, 2] = -cth * thd
    eye = np.eye(3).astype(object)
    T, Td = _blocks(eye, _zeros(3, 3), _zeros(3, 3), JA), _blocks(_zeros(3, 3), _zeros(3, 3), _zeros(3, 3), JAd)
    u = T @ xd
    return R, T, Td, u


def _paper_leg(mech, i, x, R, u):
    """Leg i as printed: p = R p_i, l (eq. 31), l-dot, l-hat (eq. 30), l-bar (eq. 37), J_D (eq. 36) and their
    time derivatives by the product rule."""
    p = R @ mech.pts[1, i].astype(object)
    v, w = u[:3], u[3:]
    l = x[:3] + p - mech.pts[0, i].astype(object)
    pd = _skew_obj(w) @ p
    ld = v + pd
    ll = l @ l
    ll_d = 2.0 * (l @ ld)
    L = np.sqrt(ll)
    Ld = (l @ ld) / L
    lh = l / L
    lhd = ld / L - l * (Ld / (L * L))
    lb = l / ll
    lbd = ld / ll - l * (ll_d / (ll * ll))
    P, Pd = _skew_obj(p).T, _skew_obj(pd).T
    Lb, Lbd = _skew_obj(lb), _skew_obj(lbd)
    JD = np.hstack([Lb, Lb @ P])
    JDd = np.hstack([Lbd, Lbd @ P + Lb @ Pd])
    return l, ld, lh, lhd, JD, JDd


def _paper_leg_frame(l, ld, lh, lhd):
    """B_R_C = [x_C y_C z_C] (eqs. 49-52) and its time derivative by the product rule."""
    rho = np.sqrt(l[0] * l[0] + l[1] * l[1])
    rhod = (l[0] * ld[0] + l[1] * ld[1]) / rho
    y, yd = _zeros(3), _zeros(3)
    y[0], y[1] = -l[1] / rho, l[0] / rho
    yd[0] = -ld[1] / rho + l[1] * rhod / (rho * rho)
    yd[1] = ld[0] / rho - l[0] * rhod / (rho * rho)
    z = _skew_obj(lh) @ y
    zd = _skew_obj(lhd) @ y + _skew_obj(lh) @ yd
    return np.column_stack([lh, y, z]), np.column_stack([lhd, yd, zd])


def _rotated(R, Rd, diag):
    D = np.diag(np.asarray(diag, dtype=float)).astype(object)
    return R @ D @ R.T, Rd @ D @ R.T + R @ D @ Rd.T


def paper_coriolis(mech, x, xd, row: str, leg: int = 0) -> np.ndarray:
    """The Coriolis/centripetal matrix of one Table 1 row computed as the paper prints it: platform eq. 28
    ``d/dt(I_P|B T)``, translating cylinder eq. 46 ``m_C J_B^T d/dt(J_B T)`` with J_B of eq. 40, rotating
    cylinder eq. 58 ``J_D^T d/dt(I_C|B J_D T)``, translating piston eq. 68 with J_G of eq. 62, rotating
    piston eq. 76 -- every matrix product as written, time derivatives by the product rule, from (x, xd)."""
    par = mech.par
    R, T, Td, u = _paper_euler(x, xd)
    if row == "platform":                       # eqs. 17, 19, 28; R-dot = omega~ R
        Rd = _skew_obj(u[3:]) @ R
        IB, IBd = _rotated(R, Rd, par[_KP.P_IPX:_KP.P_IPZ + 1])
        eye = np.eye(3).astype(object) * par[_KP.P_MP]
        I6, I6d = _blocks(eye, _zeros(3, 3), _zeros(3, 3), IB), _blocks(_zeros(3, 3), _zeros(3, 3), _zeros(3, 3),
                                                                          IBd)
        return I6d @ T + I6 @ Td
    l, ld, lh, lhd, JD, JDd = _paper_leg(mech, leg, x, R, u)
    if row in ("cylinder_translation", "piston_translation"):
        Nh, Nhd = _skew_obj(lh).T, _skew_obj(lhd).T
        if row == "cylinder_translation":       # eq. 40: J_B = b_C l-hat~^T J_D
            mass, b = par[_KP.P_MC], par[_KP.P_BC]
            J, Jd = b * (Nh @ JD), b * (Nhd @ JD + Nh @ JDd)
        else:                                   # eq. 62: J_G = [1, p~^T] - b_S l-hat~^T J_D
            mass, b = par[_KP.P_MS], par[_KP.P_BS]
            p = R @ mech.pts[1, leg].astype(object)
            pd = _skew_obj(u[3:]) @ p
            K = np.hstack([np.eye(3).astype(object), _skew_obj(p).T])
            Kd = np.hstack([_zeros(3, 3), _skew_obj(pd).T])
            J, Jd = K - b * (Nh @ JD), Kd - b * (Nhd @ JD + Nh @ JDd)
        return mass * (J.T @ (Jd @ T + J @ Td))
    RC, RCd = _paper_leg_frame(l, ld, lh, lhd)
    if row == "cylinder_rotation":              # eqs. 48, 58
        IB, IBd = _rotated(RC, RCd, par[_KP.P_ICX:_KP.P_ICZ + 1])
    elif row == "piston_rotation":              # eqs. 70, 76 (B_R_S = B_R_C)
        IB, IBd = _rotated(RC, RCd, par[_KP.P_ISX:_KP.P_ISZ + 1])
    else:
        raise ValueError(f"row must be one of {list(ROW_BITS)}, got {row!r}")
    return JD.T @ (IBd @ JD @ T + IB @ JDd @ T + IB @ JD @ Td)


def count_paper(mech, x=None, xd=None) -> dict:
    """Per-row counts {row: (add, mul, div, sqrt, trig)} of :func:`paper_coriolis` and 'total' (platform +
    6 x legs, the paper's rule), plus the matrices (row -> V) for checking against the compiled kernel."""
    rng = np.random.default_rng(7)
    x = mech.home + 0.05 * rng.standard_normal(6) if x is None else np.asarray(x, float)
    xd = rng.standard_normal(6) if xd is None else np.asarray(xd, float)
    out, mats = {}, {}
    for row in ROW_BITS:
        c = Counter()
        xs = np.array([Counted(v, c) for v in x], dtype=object)
        xds = np.array([Counted(v, c) for v in xd], dtype=object)
        V = paper_coriolis(mech, xs, xds, row)
        out[row] = (c.add, c.mul, c.div, c.sqrt, c.trig)
        mats[row] = np.vectorize(float, otypes=[float])(V)
    legs = [out[r] for r in ROW_BITS if r != "platform"]
    out["total"] = tuple(out["platform"][j] + 6 * sum(r[j] for r in legs) for j in range(5))
    return {"counts": out, "V": mats, "x": x, "xd": xd}


def format_table(counts: dict, shared: tuple | None = None, paper: dict | None = "compute") -> str:
    """Table 1's generalized-momentum column beside our counts: ``paper`` the paper's formulas evaluated as
    printed (:func:`count_paper`), ``counts`` the compiled kernel (:func:`count_coriolis`), ``shared`` one
    evaluation of all 25 matrices with shared leg kinematics (:func:`count_shared`).

    The Lagrange and Lagrange-Koditschek columns are not reproduced: rtctl has no implementation of those
    formulations of the Stewart platform (the paper gives neither's equations), and copying their figures
    would compare nothing we compute.
    """
    if isinstance(paper, str):
        from .model import StewartPlatform

        paper = count_paper(StewartPlatform())["counts"]
    names = {"platform": "mobile platform", "cylinder_translation": "each translating cylinder",
             "cylinder_rotation": "each rotating cylinder", "piston_translation": "each translating piston",
             "piston_rotation": "each rotating piston", "total": "total operations"}
    head = (f"{'Coriolis/centripetal matrix of':34s} | {'GM paper (Maple)':>18s} | {'GM as printed':>18s} | "
            f"{'GM kernel':>18s} | sqrt")
    lines = ["Operation counts (add / mul / div), Lopes 2009 Table 1, generalized momentum (GM)", head,
             "-" * len(head)]
    for k, row in enumerate(PAPER_TABLE1["rows"]):
        gm, ours = PAPER_TABLE1["generalized_momentum"][k], counts[row]
        lit = paper[row]
        lines.append(f"{names[row]:34s} | {gm[0]:5d} {gm[1]:6d} {gm[2]:4d} | {lit[0]:5d} {lit[1]:6d} {lit[2]:4d} | "
                     f"{ours[0]:5d} {ours[1]:6d} {ours[2]:4d} | {ours[3]:4d}")
    if shared is not None:
        lines.append(f"{'all 25 matrices, shared kinematics':34s} | {'':>18s} | {'':>18s} | "
                     f"{shared[0]:5d} {shared[1]:6d} {shared[2]:4d} | {shared[3]:4d}")
    lines.append("(6 sines/cosines of the Euler angles per row not in the table; Lagrange and Koditschek columns "
                 "not reproduced: no implementation of those formulations)")
    return "\n".join(lines)


if __name__ == "__main__":
    from .model import StewartPlatform

    m = StewartPlatform()
    print(format_table(count_coriolis(m)["counts"], count_shared(m)))
