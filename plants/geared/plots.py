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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=".", help="output directory")
    ap.add_argument("--duration", type=float, default=3.0)
    args = ap.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = {"virtual-link CT (G_v + G_s)": record("geared_computed_torque", args.duration),
            "CT ignoring gears (G_v only)": record("computed_torque", args.duration)}
    fig, axes = plt.subplots(4, 1, figsize=(8, 10), sharex=True)
    for label, (rep, t, err, xi) in runs.items():
        print(f"{label:<32} RMS {np.array2string(rep.tracking_rms, formatter={'float_kind': lambda x: f'{x:.2e}'})}"
              f" rad, tripped={rep.tripped}")
        for k in range(3):
            axes[k].plot(t, err[:, k], label=label)
        axes[3].plot(t, xi, lw=0.8)
    for k in range(3):
        axes[k].set_ylabel(f"e_theta{k + 1} (rad)")
    axes[0].legend()
    axes[3].set_ylabel("xi_4, xi_5, xi_6 (N m)")
    axes[3].set_xlabel("t (s)")
    fig.suptitle("3-dof GRM (Chen & Wang sec. 7): joint tracking error and motor torques")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "geared_tracking.png", dpi=100)
    print(f"wrote {out / 'geared_tracking.png'}")


if __name__ == "__main__":
    main()
