#!/usr/bin/env python3
"""EtherCAT over a veth pair: frame round trip and cycle jitter against the emulated slaves, in one run.

For each line length (1 and 7 slaves) and rate (1, 2 and 4 kHz), SOEM (pysoem) exchanges process data in
OP with the emulated line (``rtctl-hil ethercat-slaves`` in another process, on the other end of a veth pair
in a network namespace of its own), paced by sleeping to each period's start, and reports

* the round trip, send_processdata -> receive_processdata holding the answer, p50 / p99 / max in us;
* the cycle start jitter (start - its due time), p50 / p99 / max in us;
* frames answered with a working counter other than the expected one (or not answered within 1 ms).

Then the rtctl loop itself (computed torque, paced) at the same rates over the ``ethercat`` driver against seven
emulated CiA 402 drives in cyclic synchronous torque on the 7-DoF arm (arm7, 100:1), beside the CAN path (the
``cia402`` driver against two emulated drives on can_arm2, over the loopback CAN bus server crossing processes):
the loop's wake-up jitter (latency p50 / p99 / max), its driver read and write (p50 / p99), overruns, cycles
without a fresh reply, and the max tracking error.

Last, distributed clocks over a line whose clocks run 100 ppm fast (twice a poor crystal's error): the loop on
the host's clock against the loop following the reference clock (``follow_reference_clock``), 1 kHz for
``--dc-seconds`` each, two drives on can_arm2: where in the SYNC0 interval the outputs reached the reference slave
(percentiles 1 / 25 / 50 / 75 / 99 of the last 1000 frames, in us), the SYNC0 intervals that got no outputs or
two (measured by the emulated slave on its clock), and the loop's overruns.

Needs root (the namespace and the raw sockets). Usage: python benchmarks/ethercat.py [--seconds 2]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rtctl.hil.ethercat import netns  # noqa: E402

RECEIVE_TIMEOUT_US = 1000


def _percentiles(us: np.ndarray) -> str:
    return f"{np.percentile(us, 50):7.0f} {np.percentile(us, 99):7.0f} {us.max():7.0f}"


def run(slaves: int, rates: list[float], seconds: float) -> list[str]:
    import pysoem

    rows = []
    with netns.veth_namespace() as ns:
        if ns is None:
            raise SystemExit("cannot create a network namespace with a veth pair here")
        proc = netns.start_emulator(ns, "--slaves", str(slaves))
        try:
            master = pysoem.Master()
            with netns.inside(ns):
                master.open(netns.MASTER_END)
            if master.config_init() != slaves:
                raise SystemExit("the master did not find the emulated slaves")
            master.config_map()
            master.state_check(pysoem.SAFEOP_STATE, 2_000_000)
            master.state = pysoem.OP_STATE
            master.send_processdata()
            master.receive_processdata(200_000)
            master.write_state()
            if master.state_check(pysoem.OP_STATE, 2_000_000) != pysoem.OP_STATE:
                raise SystemExit("the line did not reach OP")
            for rate in rates:
                period = 1.0 / rate
                n = int(seconds * rate)
                rtt, late = np.empty(n), np.empty(n)
                wrong = 0
                due = time.perf_counter() + period
                for k in range(n):
                    while (ahead := due - time.perf_counter()) > 0:
                        time.sleep(ahead if ahead > 2e-4 else 0)
                    start = time.perf_counter()
                    late[k] = start - due
                    master.send_processdata()
                    wrong += master.receive_processdata(RECEIVE_TIMEOUT_US) != master.expected_wkc
                    rtt[k] = time.perf_counter() - start
                    due += period
                rows.append(f"{slaves:6d} {rate / 1000:5.0f} kHz {n:7d} {_percentiles(rtt * 1e6)}  "
                            f"{_percentiles(late * 1e6)} {wrong:7d}")
            master.close()
        finally:
            netns.stop_emulator(proc)
    return rows


LOOP_HEADER = ("path                          rate    cycles  jitter us p50 p99 max     read us p50 p99  "
               "write us p50 p99  overruns  stale  tracking max rad")


def _loop_row(path: str, rate: float, report, health) -> str:
    t = report.timing
    return (f"{path:<29} {rate / 1000:3.0f} kHz {report.cycles:7d} {t['latency']['p50']:7.0f} "
            f"{t['latency']['p99']:7.0f} {t['latency']['max']:7.0f} {t['driver_read']['p50']:9.0f} "
            f"{t['driver_read']['p99']:7.0f} {t['driver_write']['p50']:9.0f} {t['driver_write']['p99']:7.0f} "
            f"{report.overruns:9d} {health.stale_cycles:6d}  {report.tracking_max.max():.3f}"
            + ("  TRIPPED: " + report.trip_reason if report.tripped else ""))


def ethercat_loop(rates: list[float], seconds: float) -> list[str]:
    """The rtctl loop over the ethercat driver, seven drives on arm7 (tests/hil/test_ethercat_hil.py's run)."""
    from rtctl.config import build, validate

    q0 = [0.0, 0.5, 0.0, -1.0, 0.0, 0.5, 0.0]
    start = [q - 0.3 for q in q0]                     # the sinusoids start there, at rest
    rated = [f"{limit / 300:.4f}" for limit in (176, 176, 110, 110, 110, 10, 10)]   # peak: the joint's need
    rows = []
    for rate in rates:
        with netns.veth_namespace() as ns:
            proc = netns.start_emulator(ns, "--robot", "arm7", "--ratio", "100", "--initial", *map(str, start),
                                        "--rated-torque", *rated)
            try:
                raw = {"robot": {"model": "arm7"}, "plant": {"initial_position": start},
                       "driver": {"backend": "ethercat", "ethercat_interface": netns.MASTER_END,
                                  "vendor_id": 0x0F3E, "product_code": 0x0402, "gear_ratio": 100.0,
                                  "max_failed_cycles": 25},
                       "controller": {"type": "computed_torque", "kp": 400.0},
                       "trajectory": {"type": "sinusoid", "center": q0, "amplitude": [0.3] * 7,
                                      "frequency": [0.3, 0.4, 0.4, 0.3, 0.4, 0.4, 0.5], "phase": -1.5707963},
                       "loop": {"rate_hz": rate}, "safety": {"watchdog_cycles": 25}}
                with netns.inside(ns):
                    loop = build(validate(raw, "ethercat_arm7.toml"))
                    try:
                        report = loop.run(duration=seconds)
                    finally:
                        loop.driver.close()
                rows.append(_loop_row("ethercat: cia402 x7 (veth)", rate, report, loop.driver.health))
            finally:
                netns.stop_emulator(proc)
    return rows


def can_loop(rates: list[float], seconds: float) -> list[str]:
    """The rtctl loop over the cia402 CAN driver, two drives on can_arm2 (tests/hil/test_can_hil.py's run)."""
    from rtctl.config import build, validate
    from rtctl.hil.can_harness import BusServer, Emulator

    q0 = [0.2, -0.4]
    rows = []
    server = BusServer("rtctl-bench-cia402")
    try:
        for rate in rates:
            emu = Emulator(server, "cia402", [1, 2], "--initial", *map(str, q0), "--ratio", "10")
            try:
                loop = build(validate({
                    "robot": {"model": "can_arm2"}, "plant": {"initial_position": q0},
                    "driver": {"backend": "cia402", "can_interface": "remote", "can_channel": server.url,
                               "can_ids": [1, 2], "gear_ratio": 10.0, "max_failed_cycles": 25},
                    "controller": {"type": "computed_torque", "kp": 400.0},
                    "trajectory": {"type": "sinusoid", "center": q0, "amplitude": [0.3, 0.3],
                                   "frequency": [0.5, 0.7]},
                    "loop": {"rate_hz": rate}, "safety": {"watchdog_cycles": 25}}, "cia402_arm2.toml"))
                try:
                    report = loop.run(duration=seconds)
                finally:
                    loop.driver.close()
                rows.append(_loop_row("can: cia402 x2 (ws bus)", rate, report, loop.driver.health))
            finally:
                emu.stop()
    finally:
        server.stop()
    return rows


DC_HEADER = ("cycle                          phase in SYNC0 interval us p1 p25 p50 p75 p99   missed  doubled  "
             "overruns")


def dc_follow(seconds: float, drift_ppm: float = 100.0) -> list[str]:
    """The loop on its own clock, then on the reference clock, over a drifting line (tests/test_ethercat_driver.py's
    drifting-line run, at 1 kHz)."""
    from rtctl.config import build, validate

    q0 = [0.2, -0.4]
    rows = []
    for follow in (False, True):
        with netns.veth_namespace() as ns:
            proc = netns.start_emulator(ns, "--robot", "can_arm2", "--ratio", "10", "--initial", *map(str, q0),
                                        "--clock-drift", str(drift_ppm))
            try:
                raw = {"robot": {"model": "can_arm2"}, "plant": {"initial_position": q0},
                       "driver": {"backend": "ethercat", "ethercat_interface": netns.MASTER_END,
                                  "vendor_id": 0x0F3E, "product_code": 0x0402, "gear_ratio": 10.0,
                                  "max_failed_cycles": 25, "distributed_clocks": True,
                                  "follow_reference_clock": follow},
                       "controller": {"type": "computed_torque", "kp": 400.0},
                       "trajectory": {"type": "sinusoid", "center": q0, "amplitude": [0.3, 0.3],
                                      "frequency": [0.5, 0.7]},
                       "loop": {"rate_hz": 1000.0}, "safety": {"watchdog_cycles": 25}}
                with netns.inside(ns):
                    loop = build(validate(raw, "ethercat_dc.toml"))
                    try:
                        report = loop.run(duration=seconds)
                    finally:
                        loop.driver.close()
            finally:
                stats = netns.stop_emulator(proc)
        dc = json.loads(stats.split("STATS ", 1)[1])["slaves"][0]["dc"]
        phases = " ".join(f"{p:6.0f}" for p in dc["sync0_phase_us"])
        rows.append(f"{'reference clock' if follow else f'host clock ({drift_ppm:g} ppm off)':<30} {phases}      "
                    f"{dc['sync0_missed']:7d} {dc['sync0_doubled']:8d} {report.overruns:9d}"
                    + ("  TRIPPED: " + report.trip_reason if report.tripped else ""))
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=2.0, help="per line length and rate")
    p.add_argument("--dc-seconds", type=float, default=10.0, help="per run of the distributed clocks table")
    args = p.parse_args()
    why = netns.unavailable()
    if why:
        raise SystemExit(why)
    print("slaves  rate     cycles  round trip us p50 p99 max   start jitter us p50 p99 max  wrong wkc")
    for slaves in (1, 7):
        for row in run(slaves, [1000.0, 2000.0, 4000.0], args.seconds):
            print(row, flush=True)
    print()
    print(LOOP_HEADER)
    for row in ethercat_loop([1000.0, 2000.0, 4000.0], args.seconds) + can_loop([1000.0, 2000.0, 4000.0],
                                                                                args.seconds):
        print(row, flush=True)
    print()
    print(DC_HEADER)
    for row in dc_follow(args.dc_seconds):
        print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
