"""Seed 002 GRM: tracking of virtual-link computed torque vs a controller ignoring the gear train; writes a PNG.

    python plants/geared/plots.py --out DIR [--duration 3]

Runs plants/geared/geared.toml twice offline (controller "geared_computed_torque" = G_v + G_s, and
"computed_torque" on the virtual EOLC = G_s dropped), records joint errors and motor torques xi
(the sim driver's applied actuator torques), prints the RMS table and writes DIR/geared_tracking.png.
"""
import argparse
from pathlib import Path

import numpy as np

from rtctl.config import build, load_config

CONFIG = Path(__file__).resolve().parent / "geared.toml"


def record(controller, duration):
    cfg = load_config(CONFIG)
    cfg["controller"]["type"] = controller
    cfg["loop"]["pace"] = False
    loop = build(cfg)
    t, err, xi = [], [], []

    def hook(cycle, tt, state, command):
        t.append(tt)
        err.append(loop.q_d - state.q)
        xi.append(loop.driver._applied.copy())
    loop.hooks.append(hook)
    rep = loop.run(duration=duration)
    return rep, np.array(t), np.array(err), np.array(xi)


def rms(err):
    """Per-joint RMS of a recorded (cycles, joints) error array."""
    return np.sqrt(np.mean(np.asarray(err) ** 2, axis=0))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=".", help="output directory")
    ap.add_argument("--duration", type=float, default=3.0)
    args = ap.parse_args(argv)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = {"virtual-link CT (G_v + G_s)": record("geared_computed_torque", args.duration),
            "CT ignoring gears (G_v only)": record("computed_torque", args.duration)}
    fig, axes = plt.subplots(4, 1, figsize=(8, 10.5), sharex=True, layout="constrained",
                             gridspec_kw={"height_ratios": (1, 1, 1, 1.2)})
    styles = ({"ls": "-", "lw": 2.4, "alpha": 0.45}, {"ls": "--", "lw": 1.0})   # the xi of the two runs nearly coincide
    floor, table = np.inf, []
    for (label, (rep, t, err, xi)), style in zip(runs.items(), styles):
        e_rms = rms(err)
        table.append(e_rms)
        print(f"{label:<32} RMS {np.array2string(rep.tracking_rms, formatter={'float_kind': lambda x: f'{x:.2e}'})}"
              f" rad (recorded {np.array2string(e_rms, formatter={'float_kind': lambda x: f'{x:.2e}'})}),"
              f" tripped={rep.tripped}")
        for k in range(3):
            # |e| on a log axis: the two laws differ by one to two decades
            axes[k].semilogy(t, np.abs(err[:, k]), lw=0.8, color=f"C{len(table) - 1}",
                             label=label if k == 0 else None)
            floor = min(floor, np.percentile(np.abs(err[len(err) // 10:, k]), 5))
        for j in range(xi.shape[1]):
            axes[3].plot(t, xi[:, j], color=f"C{j + 2}", label=f"xi_{j + 4}" if style is styles[0] else None, **style)
    for k in range(3):
        axes[k].set_ylabel(f"|e_theta{k + 1}| (rad)")
        axes[k].set_ylim(bottom=max(floor, 1e-9))
        axes[k].grid(True, which="major", alpha=0.3)
        axes[k].set_title(f"joint {k + 1}: RMS {table[0][k]:.1e} rad (virtual-link CT) vs {table[1][k]:.1e} rad "
                          "(ignoring gears)", loc="left", fontsize=9)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=2, fontsize=9, frameon=False)
    axes[3].plot([], [], color="k", label="virtual-link CT", **styles[0])
    axes[3].plot([], [], color="k", label="ignoring gears", **styles[1])
    axes[3].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    axes[3].set_ylabel("motor torque xi (N m)")
    axes[3].set_xlabel("time (s)")
    axes[3].grid(True, alpha=0.3)
    fig.suptitle("3-dof GRM (Chen & Wang sec. 7): joint tracking error and motor torques")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "geared_tracking.png", dpi=100)
    plt.close(fig)
    print(f"wrote {out / 'geared_tracking.png'}")


if __name__ == "__main__":
    main()
