"""GRMs of Chen & Wang (1998): virtual-link computed torque vs a controller ignoring the gear train; writes PNGs.

    python plants/geared/plots.py --out DIR [--duration 3]

Runs plants/geared/geared.toml (the section-7 arm) and plants/geared/planetary.toml (a planetary stage with the
carrier as output link, its ``[mechanism]`` in the config) twice each offline -- controller
"geared_computed_torque" (G_v + G_s) and "computed_torque" on the virtual EOLC (G_s dropped) -- records joint
errors and motor torques xi (the sim driver's applied actuator torques), prints the RMS table and writes
DIR/geared_tracking.png and DIR/planetary_tracking.png. The paper has no figure of motions or torques
(its Figs. 1-4 are the arm, its graphs and its frames): these figures are ours.
"""
import argparse
from pathlib import Path

import numpy as np

from rtctl.config import build, load_config
from rtctl.plants.geared.control import GearedComputedTorque

HERE = Path(__file__).resolve().parent
FIGURES = {
    "geared_tracking.png": (HERE / "geared.toml", "3-dof GRM (Chen & Wang sec. 7)"),
    "planetary_tracking.png": (HERE / "planetary.toml", "planetary arm (carrier = output link 2, 3 planets)"),
}


def record(controller, duration, config=HERE / "geared.toml"):
    cfg = load_config(config)
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
    return rep, np.array(t), np.array(err), np.array(xi), list(loop.controller.mechanism.inputs) \
        if isinstance(loop.controller, GearedComputedTorque) else None


def rms(err):
    """Per-joint RMS of a recorded (cycles, joints) error array."""
    return np.sqrt(np.mean(np.asarray(err) ** 2, axis=0))


def tracking_figure(path, config, title, duration):
    """Joint errors (log) and motor torques of both controllers on ``config``; returns the per-joint RMS of each."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = {"virtual-link CT (G_v + G_s)": record("geared_computed_torque", duration, config),
            "CT ignoring gears (G_v only)": record("computed_torque", duration, config)}
    n = next(iter(runs.values()))[2].shape[1]
    inputs = next(iter(runs.values()))[4]
    fig, axes = plt.subplots(n + 1, 1, figsize=(8, 2.6 * (n + 1) + 0.6), sharex=True, layout="constrained",
                             gridspec_kw={"height_ratios": (1,) * n + (1.2,)})
    styles = ({"ls": "-", "lw": 2.4, "alpha": 0.45}, {"ls": "--", "lw": 1.0})   # the xi of the two runs nearly coincide
    floor, table = np.inf, []
    for (label, (rep, t, err, xi, _)), style in zip(runs.items(), styles):
        e_rms = rms(err)
        table.append(e_rms)
        print(f"{path.name}: {label:<30} RMS "
              f"{np.array2string(rep.tracking_rms, formatter={'float_kind': lambda x: f'{x:.2e}'})} rad (recorded "
              f"{np.array2string(e_rms, formatter={'float_kind': lambda x: f'{x:.2e}'})}), tripped={rep.tripped}")
        for k in range(n):
            # |e| on a log axis: the two laws differ by one to two decades
            axes[k].semilogy(t, np.abs(err[:, k]), lw=0.8, color=f"C{len(table) - 1}",
                             label=label if k == 0 else None)
            floor = min(floor, np.percentile(np.abs(err[len(err) // 10:, k]), 5))
        for j in range(xi.shape[1]):
            axes[n].plot(t, xi[:, j], color=f"C{j + 2}", label=f"xi of input '{inputs[j]}'" if style is styles[0] else None,
                         **style)
    for k in range(n):
        axes[k].set_ylabel(f"|e_theta{k + 1}| (rad)")
        axes[k].set_ylim(bottom=max(floor, 1e-9))
        axes[k].grid(True, which="major", alpha=0.3)
        axes[k].set_title(f"joint {k + 1}: RMS {table[0][k]:.1e} rad (virtual-link CT) vs {table[1][k]:.1e} rad "
                          "(ignoring gears)", loc="left", fontsize=9)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=2, fontsize=9, frameon=False)
    axes[n].plot([], [], color="k", label="virtual-link CT", **styles[0])
    axes[n].plot([], [], color="k", label="ignoring gears", **styles[1])
    axes[n].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    axes[n].set_ylabel("motor torque xi (N m)")
    axes[n].set_xlabel("time (s)")
    axes[n].grid(True, alpha=0.3)
    fig.suptitle(f"{title}: joint tracking error and motor torques")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"wrote {path}")
    return table


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=".", help="output directory")
    ap.add_argument("--duration", type=float, default=3.0)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, (config, title) in FIGURES.items():
        tracking_figure(out / name, config, title, args.duration)


if __name__ == "__main__":
    main()
