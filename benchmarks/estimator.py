#!/usr/bin/env python3
"""The floating-base estimators' cost per cycle against the trot's own controller, and their errors over a long
trot, estimate and truth side by side in one run (issue 33, item 5).

Cost: the median microseconds per call of ``InvariantEKF.step`` and ``LegOdometryKF.step`` (the whole Python
call, one compiled step each; the loop's ``update`` adds the look-up of the sensors' readings) and of the peer,
the seed quadruped's computed-torque law
(``LeggedComputedTorque.update``, the trot's controller, with its ground-contact model), timed in alternating
batches over the same recorded cycles of the trot; as shares of the 1 ms period and as ratios to the peer.

Figures: the seed quadruped trots for ``--duration`` s (legged_quadruped.toml's gait on its compliant ground,
computed torque at 10 kHz); its IMU, encoders and contact flags are synthesised as tests/estimation_truth.py
says (a BMI088-class IMU with constant biases and bias walks) and both estimators run on the same readings.
Printed: roll and pitch RMS error, base velocity RMS error, horizontal drift at the end as a share of the
distance walked, yaw error at the end, slips rejected, and any fault. The invariant EKF's consistency over the
same trot: ``--nees-runs`` Monte Carlo runs, each with biases and an initial error drawn from the filter's own
prior (tests/test_estimation_filters.py's NEES test), their average NEES of (R, v, p) against its two-sided
95 % chi-square interval (9 expected). ``--plot DIR`` writes the estimate against the truth.

Usage: python benchmarks/estimator.py [--duration 60] [--batches 21] [--calls 1000] [--nees-runs 8] [--plot DIR]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from estimation_truth import PERIOD, errors, monte_carlo_nees, run_estimator, synthesize, trot_truth  # noqa: E402
from scipy.stats import chi2  # noqa: E402
from rtctl.dynamics import Dynamics  # noqa: E402
from rtctl.loops.estimation import InvariantEKF, LegOdometryKF  # noqa: E402
from rtctl.plants.legged.control import LeggedComputedTorque  # noqa: E402
from rtctl.plants.legged.gait import QuadrupedTrot  # noqa: E402

# The synthesised sensors' noise as the filters' options (tests/test_estimation_filters.py's).
OPTIONS = {InvariantEKF: dict(encoder_noise=5e-4, foot_position_noise=2e-4, foot_velocity_density=2e-3),
           LegOdometryKF: dict(encoder_noise=5e-4, foot_position_noise=5e-3, foot_velocity_density=2e-3)}


def make(cls, truth):
    return cls(truth.robot.model, cls.Options(**OPTIONS[cls]), feet=truth.robot.foot_names)


def cost(truth, meas, batches, calls):
    """Median us per call of each estimator's update and of the trot's controller over the same cycles."""
    robot = truth.robot
    ctrl = LeggedComputedTorque(Dynamics(robot.model), LeggedComputedTorque.Options(kp=49.0, kd=14.0),
                                robot=robot)
    traj = QuadrupedTrot(robot=robot)
    n = traj.n
    q_d, qd_d, qdd_d, effort = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(robot.model.nv)
    cycles = range(1000, min(truth.n, 1000 + calls))
    desired = []
    for k in cycles:
        traj.sample(k * PERIOD, q_d, qd_d, qdd_d)
        desired.append((q_d.copy(), qd_d.copy(), qdd_d.copy()))
    estimators = {cls.__name__: make(cls, truth) for cls in (InvariantEKF, LegOdometryKF)}
    q, v = truth.q[0].copy(), truth.v[0].copy()
    for est in estimators.values():
        est.on_start()

    def run_estimator_batch(est):
        est.reset(truth.q[cycles[0]], truth.v[cycles[0]])
        start = time.perf_counter()
        for k in cycles:
            q[6:], v[6:] = meas.q[k, 6:], meas.v[k, 6:]
            est.step(k * PERIOD, meas.imu[k], meas.contact[k], q, v)
        return (time.perf_counter() - start) / len(cycles)

    def run_controller_batch():
        start = time.perf_counter()
        for j, k in enumerate(cycles):
            ctrl.update(k * PERIOD, PERIOD, truth.q[k], truth.v[k], *desired[j], effort)
        return (time.perf_counter() - start) / len(cycles)

    parts = {name: (lambda est=est: run_estimator_batch(est)) for name, est in estimators.items()}
    parts["LeggedComputedTorque"] = run_controller_batch
    for fn in parts.values():
        fn()
    times = {name: [] for name in parts}
    for _ in range(batches):
        for name, fn in parts.items():
            times[name].append(fn())
    faults = [est.fault_reason for est in estimators.values() if est.fault_reason]
    return {name: 1e6 * float(np.median(t)) for name, t in times.items()}, faults


def figures(truth, meas):
    rows = {}
    runs = {}
    for cls in (InvariantEKF, LegOdometryKF):
        est = make(cls, truth)
        run = run_estimator(est, truth, meas)
        e = errors(run, truth)
        e["slips"] = int(est.diag[5])
        e["fault"] = run.fault or "none"
        rows[cls.__name__], runs[cls.__name__] = e, run
    return rows, runs


def consistency(truth, runs, dim=9):
    """(average NEES over the cycles, share of cycles inside the 95 % interval, the interval) of ``runs`` Monte
    Carlo runs of the invariant EKF whose biases and initial errors are drawn from its prior."""
    averaged, fault = monte_carlo_nees(lambda: make(InvariantEKF, truth), truth, runs, dim)
    if fault:
        return float("nan"), 0.0, (0.0, 0.0), fault
    low, high = chi2.ppf(0.025, dim * runs) / runs, chi2.ppf(0.975, dim * runs) / runs
    inside = float(np.mean((averaged[1:] > low) & (averaged[1:] < high)))
    return float(averaged[1:].mean()), inside, (low, high), ""


def plot(truth, runs, outdir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from estimation_truth import _log

    colours = {"InvariantEKF": "tab:blue", "LegOdometryKF": "tab:orange"}
    fig, ax = plt.subplots(4, 1, figsize=(11, 11), sharex=True)
    fig2, (path, *err) = plt.subplots(3, 1, figsize=(11, 10))
    for name, run in runs.items():
        n = run.q.shape[0]
        t = truth.t[:n]
        tilt = np.degrees(_log(np.einsum("nij,nkj->nik", truth.R[:n], run.R)))
        for k, what in enumerate(("roll", "pitch", "yaw")):
            ax[k].plot(t, tilt[:, k], lw=0.6, color=colours[name], label=f"{name} {what} error")
        ax[3].plot(t, np.linalg.norm(run.v[:, :3] - truth.v[:n, :3], axis=1), lw=0.4, color=colours[name],
                   label=f"{name} |base velocity error|")
        err[0].plot(t, np.linalg.norm(run.q[:, :2] - truth.q[:n, :2], axis=1), color=colours[name],
                    label=f"{name} horizontal position error")
        err[1].plot(t, run.q[:, 2] - truth.q[:n, 2], color=colours[name], label=f"{name} height error")
        path.plot(run.q[:, 0], run.q[:, 1], lw=0.8, color=colours[name], label=f"{name} estimate")
    path.plot(truth.q[:, 0], truth.q[:, 1], "k--", lw=0.8, label="truth")
    for a, unit in zip(ax, ("deg", "deg", "deg", "m/s")):
        a.set_ylabel(unit)
        a.legend(loc="upper left", fontsize=8)
    ax[3].set_xlabel("time (s)")
    fig.suptitle(f"Seed quadruped trot, {truth.t[-1]:.0f} s: orientation and velocity errors")
    fig.tight_layout()
    path.set_xlabel("x (m)")
    path.set_ylabel("y (m)")
    path.legend(fontsize=8)
    path.set_title("trunk path, top view")
    for a in err:
        a.set_xlabel("time (s)")
        a.set_ylabel("m")
        a.legend(fontsize=8)
    fig2.tight_layout()
    files = [Path(outdir) / "estimator_trot_errors.png", Path(outdir) / "estimator_trot_path.png"]
    fig.savefig(files[0], dpi=90)
    fig2.savefig(files[1], dpi=90)
    print("plots:", ", ".join(str(f) for f in files))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--batches", type=int, default=21)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--nees-runs", type=int, default=8)
    parser.add_argument("--plot", default=None, help="folder for the estimate-against-truth figures")
    args = parser.parse_args(argv)
    print(f"load average before: {os.getloadavg()}")
    start = time.perf_counter()
    truth = trot_truth(args.duration)
    meas = synthesize(truth, seed=1)
    print(f"trot simulated: {args.duration:g} s in {time.perf_counter() - start:.1f} s wall")
    medians, faults = cost(truth, meas, args.batches, args.calls)
    peer = medians["LeggedComputedTorque"]
    print(f"\n{'per cycle':<28}{'median us':>12}{'share of 1 ms':>16}{'/ controller':>14}")
    for name, us in medians.items():
        method = ".update" if name == "LeggedComputedTorque" else ".step"
        print(f"{name + method:<28}{us:>12.2f}{us / 1000.0:>16.3f}{us / peer:>14.2f}")
    if faults:
        print("faults while timing:", faults)
    rows, runs = figures(truth, meas)
    print(f"\nover {args.duration:g} s ({rows['InvariantEKF']['walked']:.2f} m walked):")
    print(f"{'estimator':<16}{'roll rms':>10}{'pitch rms':>10}{'vel rms':>10}{'drift':>9}{'yaw end':>9}"
          f"{'slips':>7}  fault")
    print(f"{'':<16}{'(deg)':>10}{'(deg)':>10}{'(m/s)':>10}{'(%)':>9}{'(deg)':>9}")
    for name, e in rows.items():
        print(f"{name:<16}{np.degrees(e['roll_rms']):>10.3f}{np.degrees(e['pitch_rms']):>10.3f}"
              f"{e['velocity_rms']:>10.4f}{100 * e['drift'] / e['walked']:>9.3f}{np.degrees(e['yaw_end']):>9.3f}"
              f"{e['slips']:>7d}  {e['fault']}")
    if args.nees_runs > 0:
        mean, inside, (low, high), fault = consistency(truth, args.nees_runs)
        print(f"\nInvariantEKF NEES of (R, v, p), {args.nees_runs} Monte Carlo runs: average {mean:.2f} (9 "
              f"expected), inside [{low:.2f}, {high:.2f}] at {100 * inside:.2f} % of the cycles"
              + (f"; {fault}" if fault else ""))
    if args.plot:
        plot(truth, runs, args.plot)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
