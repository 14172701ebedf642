#!/usr/bin/env python3
"""EtherCAT over a veth pair: frame round trip and cycle jitter against the emulated slaves, in one run.

For each line length (1 and 7 slaves) and rate (1, 2 and 4 kHz), SOEM (pysoem) exchanges process data in
OP with the emulated line (``rtctl-hil ethercat-slaves`` in another process, on the other end of a veth pair
in a network namespace of its own), paced by sleeping to each period's start, and reports

* the round trip, send_processdata -> receive_processdata holding the answer, p50 / p99 / max in us;
* the cycle start jitter (start - its due time), p50 / p99 / max in us;
* frames answered with a working counter other than the expected one (or not answered within 1 ms).

Needs root (the namespace and the raw sockets). Usage: python benchmarks/ethercat.py [--seconds 2]
"""
from __future__ import annotations

import argparse
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=2.0, help="per line length and rate")
    args = p.parse_args()
    why = netns.unavailable()
    if why:
        raise SystemExit(why)
    print("slaves  rate     cycles  round trip us p50 p99 max   start jitter us p50 p99 max  wrong wkc")
    for slaves in (1, 7):
        for row in run(slaves, [1000.0, 2000.0, 4000.0], args.seconds):
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
