#!/usr/bin/env python3
"""Start-up of the commands people type, against ``python -c pass`` measured in the same run.

Each row is a fresh process from exec to exit, ``--runs`` times, interleaved (one of each per round, so a
burst of load hits every row alike):

* peer: ``python -c pass`` (the interpreter's own start);
* ``python -c "import rtctl"``;
* ``rtctl --version``;
* ``rtctl control estop`` against a running loop: the bundled demo started by ``rtctl run`` with its control
  channel on a loopback port, paced at 1 kHz for the whole benchmark (the e-stop latches its safe state;
  each later e-stop is answered as well, which is what an operator pressing it twice gets).

Reported: median, min and max in milliseconds, and the median as a multiple of the peer's. The load average
is printed before and after. ``rtctl`` is the script installed beside this interpreter (``python -m
rtctl.cli`` when there is none; the table says which).

Usage: python benchmarks/startup.py [--runs 15]
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import rtctl


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"startup: {' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")
    return elapsed


def start_loop(folder: Path, endpoint: str, rtctl_cmd: list[str]) -> subprocess.Popen:
    """The demo with its control channel on ``endpoint``, for an hour; returns once ``status`` answers."""
    demo = Path(rtctl.__file__).parent / "data" / "configs" / "demo.toml"
    config = folder / "startup.toml"
    config.write_text(demo.read_text() + f'\n[control]\nenabled = true\nendpoint = "{endpoint}"\n')
    loop = subprocess.Popen([*rtctl_cmd, "run", str(config), "--duration", "3600"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600        # a first run compiles the kernels (about a minute)
    while time.monotonic() < deadline:
        if loop.poll() is not None:
            raise SystemExit(f"startup: the loop ended ({loop.returncode}): {loop.stderr.read().strip()}")
        status = subprocess.run([*rtctl_cmd, "control", "status", "--endpoint", endpoint, "--timeout", "1"],
                                capture_output=True, text=True)
        if status.returncode == 0 and '"cycle"' in status.stdout:
            return loop
        time.sleep(0.5)
    loop.terminate()
    raise SystemExit("startup: the loop's control channel did not answer within 600 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    script = Path(sys.executable).with_name("rtctl")
    rtctl_cmd = [str(script)] if script.is_file() else [sys.executable, "-m", "rtctl.cli"]
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    rows = {"python -c pass (peer)": [sys.executable, "-c", "pass"],
            "python -c 'import rtctl'": [sys.executable, "-c", "import rtctl"],
            "rtctl --version": [*rtctl_cmd, "--version"],
            "rtctl control estop (running loop)": [*rtctl_cmd, "control", "estop", "--endpoint", endpoint]}
    print(f"Python {sys.version.split()[0]}, rtctl {rtctl.__version__} ({' '.join(rtctl_cmd)}), {os.cpu_count()} CPUs, "
          "load average before: "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    with tempfile.TemporaryDirectory() as folder:
        loop = start_loop(Path(folder), endpoint, rtctl_cmd)
        try:
            times = {name: [] for name in rows}
            for _ in range(args.runs):
                for name, argv in rows.items():
                    times[name].append(timed(argv))
        finally:
            loop.terminate()
            loop.wait(60)
    peer = statistics.median(times["python -c pass (peer)"])
    print(f"{'':36s} {'median ms':>10s} {'min ms':>8s} {'max ms':>8s} {'x peer':>7s}   ({args.runs} runs each)")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:36s} {median * 1e3:10.1f} {min(values) * 1e3:8.1f} {max(values) * 1e3:8.1f} "
              f"{median / peer:7.2f}")
    print("load average after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
