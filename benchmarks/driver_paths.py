#!/usr/bin/env python3
"""Driver HIL paths: round-trip time per cycle and achieved loop rate, in one run.

For each path the normal rtctl loop (computed torque on a small arm) runs paced
against emulated actuator firmware in another process, and reports

* round trip per cycle, command out -> state in: the time from sending the
  cycle's state request to holding every actuator's reply (for Dynamixel: the
  SYNC_READ and one status packet per servo; the SYNC_WRITE of goal currents
  is fire-and-forget), p50 / p99 / max in microseconds, over cycles whose
  exchange completed;
* the achieved loop rate (1 / mean measured period), overruns, stale cycles.

Usage: python benchmarks/driver_paths.py [--seconds 3]

Extending: every benchmark path is one function in :data:`PATHS` taking the
run length in seconds and returning a :class:`Row`.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


@dataclass
class Row:
    path: str
    target_hz: float
    achieved_hz: float
    rtt_us: tuple          # p50, p99, max over completed exchanges
    cycles: int
    overruns: int
    stale_cycles: int
    note: str = ""


def _percentiles(samples_s: np.ndarray) -> tuple:
    if samples_s.size == 0:
        return (float("nan"),) * 3
    us = samples_s * 1e6
    return float(np.percentile(us, 50)), float(np.percentile(us, 99)), float(us.max())


def dynamixel_serial(seconds: float, rate_hz: float) -> Row:
    """Dynamixel Protocol 2.0 over a pty: 2 XM430-W350 servos, SYNC_READ + SYNC_WRITE per cycle."""
    from rtctl.drivers import create_driver
    from rtctl.hil.dynamixel_emulator import EmulatorProcess, hil_arm
    from rtctl.loops.controllers import create_controller
    from rtctl.loops.trajectories import create_trajectory
    from rtctl.dynamics import Dynamics
    from rtctl.rt.loop import ControlLoop
    from rtctl.safety import SafetyMonitor

    center, amplitude = np.array([0.4, -0.3]), np.array([0.3, 0.3])
    start = center - amplitude
    with EmulatorProcess("--robot", "dxl_arm2", "--initial", ",".join(f"{x:.6f}" for x in start)) as emu:
        model = hil_arm(2)
        driver = create_driver("dynamixel", model, port=emu.port, read_timeout=min(1.5e-3, 0.6 / rate_hz))
        loop = ControlLoop(model=model, drivers=[driver],
                           controller=create_controller("computed_torque", Dynamics(model), kp=1600.0),
                           trajectory=create_trajectory("sinusoid", center=center, amplitude=amplitude,
                                                        frequency=0.5, phase=-np.pi / 2),
                           safety=SafetyMonitor(model), rate_hz=rate_hz)
        report = loop.run(duration=seconds)
        driver.close()
    n = min(driver.rtt_count, driver.rtt.shape[0])
    return Row("serial: dynamixel x2 (pty, emulator process)", rate_hz,
               1e6 / report.timing["period"]["mean"], _percentiles(driver.rtt[:n]), report.cycles,
               report.overruns, driver.health.stale_cycles,
               note=f"timeouts {driver.health.timeouts}, max tracking error "
                    f"{report.tracking_max.max():.4f} rad{', TRIPPED' if report.tripped else ''}")


def can_mit(seconds: float, rate_hz: float) -> Row:
    """MIT-mode motors on a CAN bus crossing processes (python-can-remote on 127.0.0.1): 2 AK80-9.

    The loop runs paced for the rate and tracking figures; the round trip is then
    measured back to back (no pacing): one command frame per motor out, both
    replies in, as the driver's ``write`` + ``read`` do every cycle.
    """
    import time

    from rtctl.drivers import create_driver
    from rtctl.hil.can_harness import BusServer, Emulator
    from rtctl.hil.can_robot import build_arm2
    from rtctl.loops.controllers import create_controller
    from rtctl.loops.trajectories import create_trajectory
    from rtctl.dynamics import Dynamics
    from rtctl.rt.interfaces import Command, RobotState
    from rtctl.rt.loop import ControlLoop
    from rtctl.safety import SafetyMonitor

    q0 = [0.2, -0.4]
    server = BusServer()
    emu = Emulator(server, "mit", [1, 2], "--initial", *map(str, q0))
    model = build_arm2()
    driver = create_driver("can_mit", model, can_ids=[1, 2], can_interface="remote", can_channel=server.url,
                           read_timeout=5e-4)
    try:
        loop = ControlLoop(model=model, drivers=[driver],
                           controller=create_controller("computed_torque", Dynamics(model), kp=400.0),
                           trajectory=create_trajectory("sinusoid", center=q0, amplitude=[0.3, 0.3],
                                                        frequency=[0.5, 0.7]),
                           safety=SafetyMonitor(model), rate_hz=rate_hz)
        report = loop.run(duration=seconds)
        driver.configure()
        driver.activate()
        state, command = RobotState(model), Command(model)
        rtt = np.zeros(int(seconds * rate_hz))
        for k in range(rtt.size):
            t0 = time.perf_counter()
            driver.write(command, 0.0)
            driver.read(state, 0.0)
            rtt[k] = time.perf_counter() - t0
        driver.deactivate()
    finally:
        driver.close()
        emu.stop()
        server.stop()
    return Row("can: MIT x2 (websocket bus, emulator process)", rate_hz, 1e6 / report.timing["period"]["mean"],
               _percentiles(rtt), report.cycles, report.overruns, driver.health.stale_cycles,
               note=f"timeouts {driver.health.timeouts}, max tracking error "
                    f"{report.tracking_max.max():.4f} rad{', TRIPPED' if report.tripped else ''}")


# ---- The benchmark paths, in report order. ------------------------------------------------
# Each entry: (label, function(seconds) -> Row).
PATHS = [
    ("dynamixel 500 Hz", lambda s: dynamixel_serial(s, 500.0)),
    ("dynamixel 1 kHz", lambda s: dynamixel_serial(s, 1000.0)),
    ("can mit 500 Hz", lambda s: can_mit(s, 500.0)),
]


def format_rows(rows) -> str:
    lines = [f"{'path':<44}{'target':>8}{'achieved':>10}{'rtt p50':>9}{'p99':>9}{'max':>9}"
             f"{'cycles':>8}{'overruns':>9}{'stale':>7}  (Hz, us)"]
    for r in rows:
        lines.append(f"{r.path:<44}{r.target_hz:>8.0f}{r.achieved_hz:>10.1f}{r.rtt_us[0]:>9.0f}"
                     f"{r.rtt_us[1]:>9.0f}{r.rtt_us[2]:>9.0f}{r.cycles:>8d}{r.overruns:>9d}{r.stale_cycles:>7d}"
                     + (f"  {r.note}" if r.note else ""))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--only", default=None, help="run only paths whose label contains this text")
    args = parser.parse_args(argv)
    rows = []
    for label, fn in PATHS:
        if args.only and args.only not in label:
            continue
        rows.append(fn(args.seconds))
    print(format_rows(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
