"""How stiff a sampled loop may be: the stability region of joint PD gains at the loop's period.

With an exact model, computed torque leaves each joint the double integrator ``e'' = -u`` with
``u = kp e + kd e'`` (``e = q_d - q``; the desired motion enters only as the forcing, not the homogeneous
error dynamics); a torque-level PD on a joint of effective inertia ``m`` is the same loop with the gains
``kp / m`` and ``kd / m``. The loop samples the state every period ``T``, holds ``u`` over the period (the
zero-order hold of the driver's write) and the actuators apply it ``d`` cycles late. One period of a
constant acceleration ``u`` moves the state by

    e_{k+1} = e_k + T e'_k - c T^2 u_{k-d},    e'_{k+1} = e'_k - T u_{k-d},

``c = 1/2`` for the physical world and for any integrator exact on constant acceleration (RK4), and
``c = (N + 1) / (2 N)`` for ``N`` substeps of semi-implicit Euler (the plant's :attr:`position_share`): the
zero-order-hold equivalent of the double integrator (Astrom & Wittenmark, "Computer-Controlled Systems",
3rd ed. 1997, sec. 2.3; Franklin, Powell & Workman, "Digital Control of Dynamic Systems", 3rd ed. 1998, on
hold equivalents). Closing ``u_k = kp e_k + kd e'_k`` gives, with ``a = kd T`` and ``b = kp T^2``, the
characteristic polynomial of the sampled loop

    P(z) = z^d (z - 1)^2 + (a + c b) z + (1 - c) b - a,

stable iff every root lies inside the unit circle, which the Jury criterion decides from the coefficients
(Astrom & Wittenmark sec. 3.2; here in its Schur-Cohn recursive form, :func:`schur_stable`). For ``d = 0``
and ``c = 1/2`` the region is the triangle ``b / 2 < a < 2``: ``kp T / 2 < kd < 2 / T``; one cycle of
latency roughly halves it (``kd T < 1``). ``kp = 0`` leaves the root ``z = 1`` of a free position, which is
no instability: the velocity loop ``z^d (z - 1) + a`` is checked instead.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EXACT_HOLD = 0.5   # c of the physical world (and of RK4): e += T e' + T^2 u / 2 over a period of constant u
_GRID = 256        # a-values scanned for the stable interval before bisecting its edges
_BISECTIONS = 60


@dataclass(frozen=True)
class Sampling:
    """How the loop samples its joints: ``period`` (s), ``delay`` (cycles from a write to the actuators
    applying it) and ``position_share`` (``c`` above)."""

    period: float
    delay: int = 0
    position_share: float = EXACT_HOLD

    def describe(self) -> str:
        latency = f", {self.delay} cycle{'s' if self.delay != 1 else ''} of actuator latency" if self.delay else ""
        hold = "" if self.position_share == EXACT_HOLD else f", plant step share c = {self.position_share:.4g}"
        return f"sampled every {self.period * 1e3:.4g} ms (zero-order hold{latency}{hold})"


def euler_position_share(substeps: int) -> float:
    """``c`` of ``N`` semi-implicit Euler substeps (v += h u, then q += h v): ``(N + 1) / (2 N)``."""
    return (substeps + 1) / (2.0 * substeps)


def characteristic_polynomial(kp: float, kd: float, sampling: Sampling) -> np.ndarray:
    """Coefficients of P(z) (module docstring), highest power first."""
    t, d, c = sampling.period, sampling.delay, sampling.position_share
    a, b = kd * t, kp * t * t
    p = np.zeros(d + 3)
    p[:3] = (1.0, -2.0, 1.0)
    p[-2] += a + c * b
    p[-1] += (1.0 - c) * b - a
    return p


def schur_stable(coefficients) -> bool:
    """Every root of the polynomial (highest power first) strictly inside the unit circle: the Schur-Cohn
    recursion, ``p_{n-1}(z) = (a_n p(z) - a_0 p*(z)) / z`` while ``|a_0| < |a_n|`` (Jury's table row by row)."""
    p = np.trim_zeros(np.asarray(coefficients, dtype=float), "f")
    while p.size > 1:
        lead, last = p[0], p[-1]
        if not abs(last) < abs(lead):
            return False
        p = (lead * p - last * p[::-1])[:-1]
    return True


def pd_stable(kp: float, kd: float, sampling: Sampling) -> bool:
    """The sampled PD loop of one joint (acceleration gains ``kp`` 1/s^2, ``kd`` 1/s) is stable; ``kp = 0``:
    its velocity loop is (a free position is not unstable), and with ``kd = 0`` too there is no loop."""
    if kp > 0:
        return schur_stable(characteristic_polynomial(kp, kd, sampling))
    if kd == 0:
        return True
    velocity_loop = np.zeros(sampling.delay + 2)
    velocity_loop[:2] = (1.0, -1.0)
    velocity_loop[-1] += kd * sampling.period
    return schur_stable(velocity_loop)


def _edge(inside: float, outside: float, stable) -> float:
    for _ in range(_BISECTIONS):
        middle = 0.5 * (inside + outside)
        if stable(middle):
            inside = middle
        else:
            outside = middle
    return 0.5 * (inside + outside)


def kd_interval(kp: float, sampling: Sampling) -> tuple[float, float] | None:
    """The open interval of kd (1/s) that stabilises ``kp`` (1/s^2), or None when none does.

    A stable polynomial has its constant coefficient below 1 in magnitude, so every stable ``a = kd T`` lies
    below ``2 + b``; that range is scanned and the edges of the stable run bisected."""
    t = sampling.period
    top = (2.0 + kp * t * t) / t
    grid = np.linspace(0.0, top, _GRID + 1)[1:]
    stable = [pd_stable(kp, kd, sampling) for kd in grid]
    if not any(stable):
        return None
    first = stable.index(True)
    last = first
    while last + 1 < len(stable) and stable[last + 1]:
        last += 1
    check = lambda kd: pd_stable(kp, kd, sampling)  # noqa: E731
    low = _edge(grid[first], grid[first - 1] if first else 0.0, check)
    high = _edge(grid[last], grid[last + 1] if last + 1 < len(grid) else top, check)
    return low, high


def kp_limit(sampling: Sampling) -> float:
    """The supremum of kp (1/s^2) that some kd stabilises (``4 / T^2`` without latency)."""
    t = sampling.period
    high = 4.0 / (t * t)
    if kd_interval(high, sampling) is not None:
        return high
    return _edge(0.0, high, lambda kp: kp == 0.0 or kd_interval(kp, sampling) is not None)


def gain_violation(kp, kd, sampling: Sampling, names, inertia=None, units=("1/s^2", "1/s")) -> str:
    """'' when every joint's sampled loop is stable, else one line naming the first joint outside and the
    bound: the kd interval its kp allows, or the largest kp any kd allows.

    ``kp``, ``kd``: per joint (``names``); ``inertia`` (per joint, default 1) turns torque-level gains into
    the acceleration gains of the error dynamics; ``units`` name the gains' units in the message."""
    n = len(names)
    kp = np.broadcast_to(np.asarray(kp, dtype=float), (n,))
    kd = np.broadcast_to(np.asarray(kd, dtype=float), (n,))
    m = np.ones(n) if inertia is None else np.broadcast_to(np.asarray(inertia, dtype=float), (n,))
    for j, name in enumerate(names):
        if pd_stable(kp[j] / m[j], kd[j] / m[j], sampling):
            continue
        where = (f"joint '{name}': kp = {kp[j]:.6g} {units[0]}, kd = {kd[j]:.6g} {units[1]}"
                 + (f" (effective inertia {m[j]:.4g})" if inertia is not None else "")
                 + f" make the loop {sampling.describe()} unstable")
        interval = kd_interval(kp[j] / m[j], sampling) if kp[j] > 0 else (0.0, _edge(
            0.0, 2.0 / sampling.period, lambda x: x == 0.0 or pd_stable(0.0, x, sampling)))
        if interval is None:
            return (f"{where}: kp must stay below {kp_limit(sampling) * m[j]:.6g} {units[0]} "
                    "(Jury criterion on e'' + kd e' + kp e = 0 sampled; rtctl.rt.stability)")
        low, high = interval[0] * m[j], interval[1] * m[j]
        return (f"{where}: with this kp, kd must lie in ({low:.6g}, {high:.6g}) {units[1]} "
                "(Jury criterion on e'' + kd e' + kp e = 0 sampled; rtctl.rt.stability)")
    return ""

