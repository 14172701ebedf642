#!/usr/bin/env python3
"""Control-step cost and loop jitter, measured in one run.

1. The full control step -- driver read -> trajectory -> controller (with
   inverse dynamics) -> safety -> driver write -- timed cycle by cycle over
   the sim backend, for the bundled 7-DOF arm (computed torque) and the
   18-DOF free-flyer quadruped (floating-base computed torque). The plant
   integration inside the sim driver's write (RK4: 4 forward dynamics) is
   timed separately and subtracted, since on hardware that work is the
   robot's own. Reported: median and p99 in microseconds.
   With joint friction the rigid-body plant's default integrator is the linearly implicit Rosenbrock-W
   step instead of RK4: the same arm with friction, and TALOS (32 DOFs, its URDF's damping and friction,
   if example-robot-data is installed), under each of the two, with their plant-step ratio.
2. Loop jitter: the paced 1 kHz loop on the bundled demo for ``--seconds``
   (default 10): wake-up latency p50/p99/max and the overrun count.

Usage: python benchmarks/loop.py [--seconds 10] [--cycles 5000] [--priority 80 --cpu 1]
"""
from __future__ import annotations

import argparse
import copy
import platform
import sys
import time

import numpy as np

from rtctl.config import build, validate

ARM = {
    "robot": {"model": "arm7"},
    "plant": {"initial_position": [0.0] * 7},
    "controller": {"type": "computed_torque", "kp": 400.0},
    "trajectory": {"type": "sinusoid", "center": [0.0] * 7, "amplitude": [0.3] * 7, "frequency": [0.5] * 7},
    "loop": {"rate_hz": 1000.0, "pace": False},
}
ARM_FRICTION = {**ARM, "plant": {**ARM["plant"], "viscous_friction": [0.8, 0.8, 0.5, 0.5, 0.3, 0.2, 0.2],
                                  "coulomb_friction": [2.0, 2.0, 1.5, 1.5, 0.8, 0.5, 0.5]}}   # excite.toml's
QUADRUPED = {
    "robot": {"model": "quadruped12", "floating_base": "free_flyer"},
    "plant": {"initial_position": [0.0, 0.8, -1.5] * 4},
    "controller": {"type": "floating_base_computed_torque", "kp": 100.0},
    "trajectory": {"type": "sinusoid", "center": [0.0, 0.8, -1.5] * 4, "amplitude": [0.1] * 12,
                   "frequency": [1.0] * 12},
    "loop": {"rate_hz": 1000.0, "pace": False},
    "safety": {"position_margin": 0.0},
}


def control_step_times(raw: dict, cycles: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-cycle times of the full step and of the plant step inside it (microseconds)."""
    loop = build(validate(copy.deepcopy(raw)))
    loop.driver.configure()
    loop.driver.activate()
    plant = loop.driver.plant
    plant.model.set_gravity([0.0, 0.0, 0.0]) if loop.model.has_free_flyer else None  # keep the trunk in place
    plant_times = np.zeros(cycles)
    original_step = plant.step
    k_box = [0]

    def timed_step(dt, effort):
        t0 = time.perf_counter()
        original_step(dt, effort)
        plant_times[k_box[0]] = time.perf_counter() - t0

    plant.step = timed_step
    total = np.zeros(cycles)
    for k in range(200):  # warm-up
        k_box[0] = 0
        loop.step(k * 1e-3)
    for k in range(cycles):
        k_box[0] = k
        t0 = time.perf_counter()
        loop.step((200 + k) * 1e-3)
        total[k] = time.perf_counter() - t0
    if loop.safety.tripped:
        raise RuntimeError(f"benchmark run tripped: {loop.safety.trip_reason}")
    return total * 1e6, plant_times * 1e6


def talos() -> dict | None:
    """TALOS without its hands (example-robot-data, a test extra) held mid-range under computed torque."""
    import importlib.metadata

    from rtctl.model.urdf import load_urdf
    from rtctl.rt.interfaces import actuated_indices
    try:
        files = importlib.metadata.files("example-robot-data") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    path = next((str(f.locate()) for f in files if f.name == "talos_reduced.urdf"), None)
    if path is None:
        return None
    model = load_urdf(path)
    q_index = actuated_indices(model)[0]
    mid = model.neutral_configuration()[q_index]
    limited = np.isfinite(model.lower[q_index]) & np.isfinite(model.upper[q_index])
    mid[limited] = 0.5 * (model.lower[q_index] + model.upper[q_index])[limited]
    return {"robot": {"model": path}, "plant": {"initial_position": mid.tolist()},
            "controller": {"type": "computed_torque", "kp": 400.0},
            "trajectory": {"type": "sinusoid", "center": mid.tolist(), "amplitude": [0.02] * len(mid),
                           "frequency": [0.5] * len(mid)},
            "loop": {"rate_hz": 1000.0, "pace": False}}


def friction_rows(cycles: int) -> None:
    """The plant step of each integrator on robots with joint friction, and their ratio in this run."""
    print(f"\nplant step with joint friction, {cycles} cycles, microseconds")
    print(f"{'model':<30}{'rk4 p50':>9}{'rosenbrock p50':>16}{'ratio':>7}{'rosenbrock p99':>16}")
    for label, raw in (("7-DOF arm, friction", ARM_FRICTION), ("32-DOF TALOS, URDF friction", talos())):
        if raw is None:
            print(f"{label:<30}  (example-robot-data is not installed)")
            continue
        plant = {}
        for integrator in ("rk4", "rosenbrock"):
            config = copy.deepcopy(raw)
            config["plant"]["integrator"] = integrator
            plant[integrator] = control_step_times(config, cycles)[1]
        rk4, rosenbrock = np.median(plant["rk4"]), np.median(plant["rosenbrock"])
        print(f"{label:<30}{rk4:>9.1f}{rosenbrock:>16.1f}{rosenbrock / rk4:>7.2f}"
              f"{np.percentile(plant['rosenbrock'], 99):>16.1f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--cycles", type=int, default=5000)
    parser.add_argument("--priority", type=int, default=None, help="SCHED_FIFO priority for the jitter run")
    parser.add_argument("--cpu", type=int, default=None, help="pin the jitter run to this CPU")
    args = parser.parse_args(argv)
    print(f"rtctl loop benchmark | Python {platform.python_version()} | {platform.machine()}")
    print(f"\ncontrol step (read -> controller with ID -> safety -> write), {args.cycles} cycles, microseconds")
    print(f"{'model':<28}{'step p50':>10}{'step p99':>10}{'plant p50':>11}{'control p50':>13}{'control p99':>13}")
    for label, raw in (("7-DOF arm, CT", ARM), ("18-DOF quadruped, FB-CT", QUADRUPED)):
        total, plant = control_step_times(raw, args.cycles)
        control = total - plant
        print(f"{label:<28}{np.median(total):>10.1f}{np.percentile(total, 99):>10.1f}{np.median(plant):>11.1f}"
              f"{np.median(control):>13.1f}{np.percentile(control, 99):>13.1f}")
    friction_rows(args.cycles)

    cycles = int(args.seconds * 1000)
    from rtctl.config import DEMO_CONFIG
    from rtctl.config import load_config
    cfg = load_config(DEMO_CONFIG)
    cfg["loop"]["realtime_priority"] = args.priority
    cfg["loop"]["cpus"] = None if args.cpu is None else [args.cpu]
    cfg["loop"]["lock_memory"] = args.priority is not None
    loop = build(cfg)
    report = loop.run(cycles=cycles)
    lat, per = report.timing["latency"], report.timing["period"]
    print(f"\njitter: paced demo loop at 1 kHz for {args.seconds:g} s ({report.cycles} cycles); "
          f"{report.realtime}")
    print(f"{'wake-up latency (us)':<24}{'p50':>8}{'p99':>8}{'max':>9}   period mean {per['mean']:.1f} us, "
          f"overruns {report.overruns}")
    print(f"{'':<24}{lat['p50']:>8.1f}{lat['p99']:>8.1f}{lat['max']:>9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
