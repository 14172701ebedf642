"""Figure of an external-wrench observer: the estimated wrench against the one applied (the arm's
:mod:`loops.observer`, the platforms' :mod:`rtctl.plants.stewart.observer`)."""
from __future__ import annotations

import numpy as np

FORCES = (("fx", "C0"), ("fy", "C1"), ("fz", "C2"))
MOMENTS = (("nx", "C3"), ("ny", "C4"), ("nz", "C5"))


def plot_wrench_estimate(path, t, applied, estimated, title: str, *, windows, where: str):
    """Two panels over control time ``t`` (N,): force (N) and moment (N m) of the ``applied`` and ``estimated``
    wrenches (N, 6), each [n; f] in base axes about the point ``where`` names (``"the platform centre"``). The
    applied one is drawn thick and light, the estimate thin in the same colour; the legends sit outside the axes.
    ``windows``: ``[(label, t0, t1), ...]``; the title gives, per window, the largest |estimated - applied| of the
    force and of the moment for t0 <= t < t1 (shaded on the plot). Each panel's scale is 1.3 times the largest
    applied value or estimate inside the windows; an estimate beyond it elsewhere (say, through a near-singular
    Jacobian) is cut off and its extreme named in the title. Saves a PNG at ``path``; returns
    ``(path, {label: (force error N, moment error N m)})``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = np.asarray(t, dtype=float)
    applied, estimated = np.asarray(applied, dtype=float), np.asarray(estimated, dtype=float)
    errors, lines = {}, [title]
    for label, t0, t1 in windows:
        err = np.abs(estimated - applied)[(t >= t0) & (t < t1)].max(axis=0)
        errors[label] = (float(err[3:].max()), float(err[:3].max()))
        lines.append(f"{label} ({t0:g}-{t1:g} s): largest |error| {errors[label][0]:.3g} N, "
                     f"{errors[label][1]:.3g} N m")
    inside = np.zeros(t.size, dtype=bool)
    for _, t0, t1 in windows:
        inside |= (t >= t0) & (t < t1)
    fig, axes = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    for ax, names, offset, what, unit in ((axes[0], FORCES, 3, "force", "N"), (axes[1], MOMENTS, 0, "moment", "N m")):
        part = slice(offset, offset + 3)
        scale = 1.3 * max(np.abs(applied[:, part]).max(), np.abs(estimated[inside, part]).max(), 1e-9)
        beyond = np.abs(estimated[:, part]).max(axis=1) > scale
        if beyond.any():
            k = int(np.argmax(np.abs(estimated[:, part]).max(axis=1)))
            lines.append(f"off scale: the {what} estimate reaches {np.abs(estimated[k, part]).max():.3g} {unit} "
                         f"at t = {t[k]:.3g} s")
            ax.set_ylim(-scale, scale)
        for k, (name, colour) in enumerate(names):
            ax.plot(t, applied[:, offset + k], colour, lw=2.5, alpha=0.35, label=f"{name} applied")
            ax.plot(t, estimated[:, offset + k], colour, lw=1, label=f"{name} estimated")
        for shade, (_, t0, t1) in zip(("0.93", "0.86"), windows):
            ax.axvspan(t0, t1, color=shade, zorder=0)
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("force (N)")
    axes[1].set_ylabel(f"moment about\n{where} (N m)")
    axes[1].set_xlabel("control time (s)")
    axes[0].set_title("\n".join(lines), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path), errors
