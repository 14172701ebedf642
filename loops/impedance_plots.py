"""Figures of the Cartesian impedance controller (:mod:`loops.impedance`)."""
from __future__ import annotations

import numpy as np

AXES = ("x", "y", "z", "rx", "ry", "rz")


def plot_stiffness(set_stiffness, measured_stiffness, path, title: str = "") -> str:
    """Bar chart of the measured against the set stiffness per axis (translational N/m, rotational N m/rad,
    the user order x, y, z, rx, ry, rz), the relative difference printed over each pair; saves a PNG at
    ``path`` and returns it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k_set = np.asarray(set_stiffness, dtype=float).reshape(6)
    k_meas = np.asarray(measured_stiffness, dtype=float).reshape(6)
    deviation = (k_meas - k_set) / k_set
    fig, (ax_lin, ax_rot) = plt.subplots(1, 2, figsize=(10, 4.2))
    width = 0.38
    for ax, sl, unit in ((ax_lin, slice(0, 3), "N/m"), (ax_rot, slice(3, 6), "N m/rad")):
        pos = np.arange(3)
        ax.bar(pos - width / 2, k_set[sl], width, label="set K", color="tab:blue")
        ax.bar(pos + width / 2, k_meas[sl], width, label="measured F / displacement", color="tab:orange")
        for p, k, d in zip(pos, k_meas[sl], deviation[sl]):
            ax.annotate(f"{100 * d:+.1e} %", (p + width / 2, k), textcoords="offset points", xytext=(0, 3),
                        ha="center", fontsize=8)
        ax.set_xticks(pos, [f"{a}" for a in AXES[sl]])
        ax.set_xlabel("axis (world, at the frame origin)")
        ax.set_ylabel(f"stiffness ({unit})")
        ax.set_ylim(0, 1.22 * max(k_set[sl].max(), k_meas[sl].max()))
    ax_lin.legend(loc="upper left", fontsize=8)
    worst = float(np.abs(deviation).max())
    fig.suptitle(title or f"Cartesian impedance: measured vs set stiffness (worst deviation {100 * worst:.2g} %)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)
