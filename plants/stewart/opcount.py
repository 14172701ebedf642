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


def format_table(counts: dict, shared: tuple | None = None) -> str:
    """Table 1 beside our counts."""
    names = {"platform": "mobile platform", "cylinder_translation": "each translating cylinder",
             "cylinder_rotation": "each rotating cylinder", "piston_translation": "each translating piston",
             "piston_rotation": "each rotating piston", "total": "total operations"}
    head = (f"{'Coriolis/centripetal matrix of':32s} | {'Lagrange (paper)':>20s} | {'GM (paper)':>18s} | "
            f"{'GM (rtctl, counted)':>24s} | sqrt")
    lines = ["Operation counts (add / mul / div): Lopes 2009 Table 1 vs our generalized-momentum kernel", head,
             "-" * len(head)]
    for k, row in enumerate(PAPER_TABLE1["rows"]):
        la, gm, ours = PAPER_TABLE1["lagrange"][k], PAPER_TABLE1["generalized_momentum"][k], counts[row]
        lines.append(f"{names[row]:32s} | {la[0]:6d} {la[1]:6d} {la[2]:5d} | {gm[0]:5d} {gm[1]:6d} {gm[2]:4d} | "
                     f"{ours[0]:7d} {ours[1]:8d} {ours[2]:6d} | {ours[3]:4d}")
    if shared is not None:
        lines.append(f"{'all 25 matrices, shared kinematics':32s} | {'':>20s} | {'':>18s} | "
                     f"{shared[0]:7d} {shared[1]:8d} {shared[2]:6d} | {shared[3]:4d}")
    lines.append("(trigonometric functions not counted: 6 sin/cos of the Euler angles per evaluation)")
    return "\n".join(lines)


if __name__ == "__main__":
    from .model import StewartPlatform

    m = StewartPlatform()
    print(format_table(count_coriolis(m)["counts"], count_shared(m)))
