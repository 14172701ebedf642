"""Force-torque processing: the bias (tare), the gravity of the load a sensor carries, and the wrench moved to
any frame of the model.

A six-axis sensor's reading ``w_m`` (``[torque; force]``, the sensor's frame, :mod:`rtctl.drivers.sensor`)
is the wrench its distal side exerts across it: the external wrench applied there, plus the weight (and, in
motion, the inertial forces) of what it carries, plus the device's offset. :class:`WrenchProcessing` keeps

    w_c = w_m - b - w_g(q)

the compensated reading: ``w_g(q)`` the weight of the load at the configuration ``q`` -- every body the
sensor's body carries, as the model gives their masses and centres of mass (a model with its payload fused in,
:meth:`rtctl.model.Model.with_payload`, or an identified one, :mod:`rtctl.loops.identification`), plus a
``tool_mass`` at ``tool_com`` (m, the sensor's frame) the model does not have; ``b`` the bias that
:meth:`WrenchProcessing.tare` sets so that ``w_c`` reads zero at that moment. For every body k of the load,
with ``g`` the model's gravity, ``c_k`` its centre of mass and ``(R_s, p_s)`` the sensor's world pose:

    w_g = [R_s^T sum_k (c_k - p_s) x m_k g;  R_s^T sum_k m_k g]

(the statics of a rigid load: its weight acts at its centre of mass). The inertial forces of the load in
motion are not compensated: at rest and at low accelerations ``w_c`` is the external wrench. Before the
sensor's first sample (its reading is NaN) ``w_c`` is zero.

``w_c`` moves to another frame F (a link or frame of the model, origin ``p_F``, axes ``R_F``) as a wrench
does: ``f_F = R_F^T R_s f``, ``n_F = R_F^T (R_s n + (p_s - p_F) x R_s f)``; with ``world_axes`` the axes stay
the world's (the Cartesian impedance controller's convention, :mod:`rtctl.loops.impedance`). One compiled call
(forward kinematics, load, compensation, the move) per :meth:`WrenchProcessing.update`, allocation-free.

The joint torques of ``w_c`` (:meth:`WrenchProcessing.joint_torques`): a wrench ``w = [n; f]`` acting on the
sensor's body about its origin ``p_s`` (world axes) loads the joints with ``tau = J_s(q)^T w``, ``J_s`` the
world-aligned Jacobian ``[angular; linear]`` of that origin (virtual work; Siciliano, Sciavicco, Villani & Oriolo,
"Robotics: Modelling, Planning and Control", Springer 2009, sec. 3.8, statics): what a momentum observer estimates
of a contact beyond the sensor (:mod:`rtctl.loops.collision`).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from rtctl.dynamics import Dynamics
from rtctl.dynamics.kernels import W_D, W_O, W_R, forward_kinematics, point_jacobian
from rtctl.model import MF_MASS, ModelError

# Rows of the processing's array (6 wide).
P_MEASURED, P_BIAS, P_LOAD, P_COMPENSATED, P_MOVED = range(5)
P_ROWS = 5


@njit(cache=True, inline="always")
def _pose(ws, body, placement, pose):
    """World rotation (row-major) and origin of a frame at ``placement`` (R row-major, p) in ``body`` (-1: the
    world) into ``pose`` (12)."""
    for r in range(3):
        for c in range(3):
            if body < 0:
                pose[3 * r + c] = placement[3 * r + c]
            else:
                pose[3 * r + c] = (ws[body, W_R + 3 * r] * placement[c] + ws[body, W_R + 3 * r + 1] * placement[3 + c]
                                   + ws[body, W_R + 3 * r + 2] * placement[6 + c])
        if body < 0:
            pose[9 + r] = placement[9 + r]
        else:
            pose[9 + r] = ws[body, W_O + r] + (ws[body, W_R + 3 * r] * placement[9] + ws[body, W_R + 3 * r + 1]
                                               * placement[10] + ws[body, W_R + 3 * r + 2] * placement[11])


@njit(cache=True)
def process_wrench(mi, mf, ws, q, bodies, body, mount, tool, rows, target_body, target, world_axes, poses):
    """The module docstring's w_g (``rows[P_LOAD]``), w_c (``rows[P_COMPENSATED]``) from ``rows[P_MEASURED]`` and
    ``rows[P_BIAS]``, and w_c moved to the frame ``target`` in ``target_body`` (``rows[P_MOVED]``; no move for
    ``target_body < -1``). ``bodies``: the load's bodies; ``tool``: mass and centre of mass (sensor frame);
    ``poses`` (2, 12): scratch for the sensor's and the target's world poses."""
    forward_kinematics(mi, mf, ws, q)
    s, t = poses[0], poses[1]
    _pose(ws, body, mount, s)
    nb = mi.shape[0]
    gx, gy, gz = mf[nb, 0], mf[nb, 1], mf[nb, 2]
    f0 = f1 = f2 = n0 = n1 = n2 = 0.0
    for j in range(bodies.shape[0] + 1):
        if j < bodies.shape[0]:
            k = bodies[j]
            m = mf[k, MF_MASS]
            cx, cy, cz = ws[k, W_O] + ws[k, W_D], ws[k, W_O + 1] + ws[k, W_D + 1], ws[k, W_O + 2] + ws[k, W_D + 2]
        else:
            m = tool[0]
            cx = s[9] + s[0] * tool[1] + s[1] * tool[2] + s[2] * tool[3]
            cy = s[10] + s[3] * tool[1] + s[4] * tool[2] + s[5] * tool[3]
            cz = s[11] + s[6] * tool[1] + s[7] * tool[2] + s[8] * tool[3]
        rx, ry, rz = cx - s[9], cy - s[10], cz - s[11]
        wx, wy, wz = m * gx, m * gy, m * gz
        n0 += ry * wz - rz * wy
        n1 += rz * wx - rx * wz
        n2 += rx * wy - ry * wx
        f0, f1, f2 = f0 + wx, f1 + wy, f2 + wz
    load, comp = rows[P_LOAD], rows[P_COMPENSATED]
    for a in range(3):   # into the sensor's axes: R_s^T
        load[a] = s[a] * n0 + s[3 + a] * n1 + s[6 + a] * n2
        load[3 + a] = s[a] * f0 + s[3 + a] * f1 + s[6 + a] * f2
    sampled = True          # the sensor's reading is NaN until its first sample: no measurement, zero
    for a in range(6):
        sampled = sampled and np.isfinite(rows[P_MEASURED, a])
    for a in range(6):
        comp[a] = rows[P_MEASURED, a] - rows[P_BIAS, a] - load[a] if sampled else 0.0
    if target_body < -1:
        return
    _pose(ws, target_body, target, t)
    nw0 = s[0] * comp[0] + s[1] * comp[1] + s[2] * comp[2]    # R_s n, R_s f: world axes
    nw1 = s[3] * comp[0] + s[4] * comp[1] + s[5] * comp[2]
    nw2 = s[6] * comp[0] + s[7] * comp[1] + s[8] * comp[2]
    fw0 = s[0] * comp[3] + s[1] * comp[4] + s[2] * comp[5]
    fw1 = s[3] * comp[3] + s[4] * comp[4] + s[5] * comp[5]
    fw2 = s[6] * comp[3] + s[7] * comp[4] + s[8] * comp[5]
    dx, dy, dz = s[9] - t[9], s[10] - t[10], s[11] - t[11]   # p_s - p_F
    nw0 += dy * fw2 - dz * fw1
    nw1 += dz * fw0 - dx * fw2
    nw2 += dx * fw1 - dy * fw0
    moved = rows[P_MOVED]
    if world_axes:
        moved[0], moved[1], moved[2], moved[3], moved[4], moved[5] = nw0, nw1, nw2, fw0, fw1, fw2
    else:
        for a in range(3):
            moved[a] = t[a] * nw0 + t[3 + a] * nw1 + t[6 + a] * nw2
            moved[3 + a] = t[a] * fw0 + t[3 + a] * fw1 + t[6 + a] * fw2


@njit(cache=True)
def joint_torques_of(mi, ws, body, mount, wrench, jac, out):
    """``out`` (nv) = ``J_s^T wrench`` (module docstring): ``wrench`` [n; f] about the sensor's origin (``mount``'s
    last 3 values, in ``body``), world axes; ``jac`` (6, nv) scratch. Uses the poses in ``ws``
    (:func:`process_wrench` computes them). Zero for a sensor fixed to the world (``body < 0``)."""
    if body < 0:
        out[:] = 0.0
        return
    point_jacobian(mi, ws, body, mount[9], mount[10], mount[11], jac)
    for c in range(jac.shape[1]):
        s = 0.0
        for r in range(6):
            s += jac[r, c] * wrench[r]
        out[c] = s


def carried_bodies(model, body: int) -> np.ndarray:
    """``body`` and every body below it in the tree (what a sensor fixed in ``body`` carries)."""
    out = []
    for k in range(model.nbodies):
        j = k
        while j >= 0 and j != body:
            j = model.parent[j]
        if j == body:
            out.append(k)
    return np.array(out, dtype=np.int64)


def placement(rotation, translation) -> np.ndarray:
    """The 12 values (rotation row-major, translation) the kernels take for a frame in its body."""
    return np.ascontiguousarray(np.concatenate([np.asarray(rotation, float).reshape(9),
                                                np.asarray(translation, float)]))


class WrenchProcessing:
    """The module docstring's processing for ``sensor`` (a force-torque :class:`rtctl.drivers.sensor.Sensor`)
    over ``model`` (its masses: the load's gravity; ``model_load=False``: only the tool's)."""

    def __init__(self, model, sensor, *, model_load: bool = True, tool_mass: float = 0.0, tool_com=(0.0, 0.0, 0.0)):
        if sensor.kind != "force_torque":     # rtctl.drivers.sensor's kinds (a layer beside this one)
            raise ValueError(f"{sensor.name}: a {sensor.kind} sensor, not a force_torque one")
        tool = np.array([tool_mass, *np.broadcast_to(np.asarray(tool_com, dtype=float), (3,))], dtype=float)
        if not (np.all(np.isfinite(tool)) and tool[0] >= 0):
            raise ValueError(f"{sensor.name}: tool_mass must be >= 0 kg and tool_com 3 finite values (m), got "
                             f"{tool_mass!r}, {tool_com!r}")
        self.model, self.sensor, self.tool = model, sensor, tool
        self.dyn = Dynamics(model)
        self.bodies = carried_bodies(model, sensor.body) if model_load and sensor.body >= 0 else \
            np.zeros(0, dtype=np.int64)
        self.mount = placement(sensor.rotation, sensor.translation)
        self.rows = np.zeros((P_ROWS, 6))
        self.bias, self.load, self.compensated, self.moved = (self.rows[k] for k in (P_BIAS, P_LOAD, P_COMPENSATED,
                                                                                     P_MOVED))
        self._poses = np.zeros((2, 12))
        self._none = np.zeros(12)
        self._own = (int(sensor.body), self.mount)    # the sensor's origin as a target, for joint_torques
        self._jac = np.zeros((6, model.nv))

    def target(self, frame: str) -> tuple[int, np.ndarray]:
        """``(body, placement)`` of a link or frame of the model, for :meth:`update`."""
        try:
            f = self.model.frame(frame)
        except ModelError as exc:
            raise ValueError(f"{self.sensor.name}: target frame: {exc}") from None
        return int(f.body), placement(f.rotation, f.translation)

    def update(self, q, target=None, world_axes: bool = False) -> np.ndarray:
        """From the sensor's newest reading at configuration ``q`` (nq): the load, the compensated wrench and,
        given a ``target`` (from :meth:`target`), it moved there (:attr:`moved`); returns :attr:`compensated`."""
        self.rows[P_MEASURED] = self.sensor.reading.wrench
        body, frame = (-2, self._none) if target is None else target
        dyn = self.dyn
        process_wrench(dyn.mi, dyn.mf, dyn.ws, q, self.bodies, self.sensor.body, self.mount, self.tool, self.rows,
                       body, frame, bool(world_axes), self._poses)
        return self.compensated

    def joint_torques(self, q, out) -> np.ndarray:
        """The compensated wrench as joint torques into ``out`` (nv; N m or N): ``J_s(q)^T w_c`` (module
        docstring). :attr:`moved` is then ``w_c`` in world axes about the sensor's origin."""
        self.update(q, self._own, world_axes=True)
        joint_torques_of(self.dyn.mi, self.dyn.ws, self.sensor.body, self.mount, self.moved, self._jac, out)
        return out

    def tare(self, q) -> None:
        """Take the present compensated reading as the bias: it reads zero now (no contact at this moment)."""
        self.update(q)
        self.bias += self.compensated
        self.compensated[:] = 0.0
