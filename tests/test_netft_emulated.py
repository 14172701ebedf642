"""The ``netft_emulated`` sensor backend in whole runs: the netft backend reading an emulated ATI Net F/T in
another process, which measures the simulated plant's wrench at the sensor through the feed this process writes.

* Offline (the plant's clock) each record's device stamp is the plant time of the step it measured, and the
  reading less the ``sim_force_torque`` backend's (no noise, same frame, same run) at that step is the
  emulator's noise: the Gamma SI-130-10's resolution per axis times ``noise_scale`` as its standard deviation,
  plus the rounding to counts -- the residuals' mean within 5 standard errors and their variance within 5 of
  its own (chi-square) of that; every tick sent, none lost.
* Paced (the wall clock) a record's plant time is known only to a window derived from the run's own arrival
  lags: each reading is within 5 sigma of the truth over that window.
* The shipped config (arm_wrench_impedance_emulated) runs with `rtctl run` offline and paced, without a trip.
* A loop process stopped by SIGTERM or killed by SIGKILL leaves no emulator and no shared block; an emulator
  that stops (SIGSTOP) or dies faults the run within max_age, on one line, and the robot stays in its safe
  state; offline, lockstep waits for it one LOCKSTEP_TIMEOUT and lets it go.
* Another user cannot open the feed; the emulator serves loopback only, on ports the system picked, different
  for two sensors side by side.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import tomllib
from multiprocessing import shared_memory

import numpy as np
import pytest

from rtctl.config import ConfigError, bundled_config_path, build, validate
from rtctl.hil.emulated_device import LOCKSTEP_TIMEOUT
from rtctl.hil.emulated_netft import EmulatedNetFT
from rtctl.hil.netft_sensor import GAMMA_SI_130_10

from emulator_processes import signal_a_run
from other_user import as_other_user

CONFIG = "arm_wrench_impedance_emulated"
RESOLUTION = np.array(GAMMA_SI_130_10["resolution"])
SIGMA = np.concatenate([RESOLUTION[3:], RESOLUTION[:3]])       # per unit noise_scale, [torque; force]
COUNT = 1.0 / GAMMA_SI_130_10["counts_per_force"]              # N (and N m) per count


def shipped(pace: bool, duration: float, **wrist) -> dict:
    """The shipped config's table with ``wrist``'s keys changed, and a noiseless sim_force_torque sensor
    "truth" on the same frame."""
    raw = tomllib.loads(bundled_config_path(CONFIG).read_text())
    raw["loop"].update(pace=pace, duration=duration)
    raw["sensors"][0].update(wrist)
    raw["sensors"].append({"name": "truth", "kind": "force_torque", "backend": "sim_force_torque",
                           "frame": raw["sensors"][0]["frame"]})
    return validate(raw, "wrist.toml")


class Recorder:
    """Per cycle: control time, the truth, the emulated reading, its freshness and device stamp."""

    def __init__(self, loop, duration: float):
        n = int(round(loop.rate_hz * duration)) + 10
        self.t, self.fresh, self.stamp = np.full(n, np.nan), np.zeros(n, dtype=bool), np.zeros(n)
        self.truth, self.wrist = np.zeros((n, 6)), np.zeros((n, 6))
        self.cycles = 0
        loop.hooks.append(self)

    def __call__(self, cycle, t, state, command):
        reading = state.sensors["wrist"]
        self.t[cycle], self.fresh[cycle], self.stamp[cycle] = t, reading.fresh, reading.device_stamp
        self.truth[cycle], self.wrist[cycle] = state.sensors["truth"].wrench, reading.wrench
        self.cycles = cycle + 1

    def trim(self):
        n = self.cycles
        for name in ("t", "fresh", "stamp", "truth", "wrist"):
            setattr(self, name, getattr(self, name)[:n])
        return self


def run(cfg: dict):
    loop = build(cfg)
    wrist = loop.sensors[0]
    assert isinstance(wrist, EmulatedNetFT)
    rec = Recorder(loop, cfg["loop"]["duration"])
    try:
        report = loop.run(duration=cfg["loop"]["duration"])
    finally:
        wrist.close()
    return loop, report, rec.trim()


@pytest.mark.slow
def test_offline_each_reading_is_the_sim_sensors_at_its_plant_step_within_the_gammas_noise(capsys):
    """1.5 s of the shipped config offline, noise_scale 2: the residual against the noiseless sim sensor is the
    emulator's noise (2 x the Gamma's resolution, plus a uniform count rounding), mean and variance."""
    noise_scale = 2.0
    cfg = shipped(pace=False, duration=1.5, noise_scale=noise_scale)
    loop, report, rec = run(cfg)
    wrist = loop.sensors[0]
    assert wrist.clock == "plant" and not report.tripped, report.trip_reason
    assert report.late_kernels == []
    assert rec.stamp[0] == 0.0 and np.all(np.isfinite(rec.wrist[0]))    # the first cycle has the first record
    rows = np.flatnonzero(rec.fresh)
    at = np.round(rec.stamp[rows] / loop.period).astype(int)
    assert np.allclose(at * loop.period, rec.stamp[rows], atol=1e-9)     # every stamp is a step of the plant
    assert np.all(at <= rows)                                            # and not a later one
    residual = rec.wrist[rows] - rec.truth[at]
    n = len(rows)
    expected = (noise_scale * SIGMA) ** 2 + COUNT ** 2 / 12
    assert np.all(np.abs(residual.mean(0)) < 5 * np.sqrt(expected / n)), (residual.mean(0), np.sqrt(expected / n))
    ratio = residual.var(0) / expected
    assert np.all(np.abs(ratio - 1) < 5 * np.sqrt(2 / n)), (ratio, n)
    assert np.all(np.ptp(rec.truth, axis=0)[3:] > 50 * noise_scale * SIGMA[3:])   # the load moved: the check bites
    counts = wrist.counters()
    assert counts["rdt_lost"] == 0 and counts["rdt_stale"] == 0 and counts["corrupt_datagrams"] == 0
    stats = wrist.emulation.stats
    assert stats["truth_misses"] == 0 and stats["late_ticks"] == 0
    assert stats["records"] >= round(rec.stamp[rows[-1]] / loop.period) + 1     # every tick up to the last read
    lag = rec.t[rows] - rec.stamp[rows]
    with capsys.disabled():
        print(f"\nnetft_emulated offline: {n} fresh reads of {len(rec.t)} cycles, {stats['records']} records; lag "
              f"median {np.median(lag) * 1e3:.1f} ms, max {lag.max() * 1e3:.1f} ms of simulated time; lockstep "
              f"waited {wrist.lockstep_waits} times, {wrist.lockstep_seconds * 1e3:.0f} ms in all")


@pytest.mark.slow
def test_paced_each_reading_is_the_truth_somewhere_in_its_window(capsys):
    """0.8 s paced: the wall clock; each reading within 5 sigma of the truth somewhere in the window of plant
    times its record can have been taken at: from its tick (at the earliest the fastest arrival's lag, less two
    periods, before its arrival) to its arrival."""
    cfg = shipped(pace=True, duration=0.8)
    loop, report, rec = run(cfg)
    assert loop.sensors[0].clock == "wall" and not report.tripped, report.trip_reason
    rows = np.flatnonzero(rec.fresh)
    assert len(rows) > 50
    lag = rec.t[rows] - rec.stamp[rows]
    bound = 5 * SIGMA + COUNT
    for row, own_lag in zip(rows, lag):
        start = max(0, int(np.floor((rec.t[row] - (own_lag - lag.min()) - 2 * loop.period) / loop.period)))
        window = rec.truth[start:row + 1]
        inside = (rec.wrist[row] >= window.min(0) - bound) & (rec.wrist[row] <= window.max(0) + bound)
        assert np.all(inside), (row, rec.wrist[row], window.min(0), window.max(0))
    with capsys.disabled():
        print(f"\nnetft_emulated paced: {len(rows)} fresh reads, arrival lag spread {np.ptp(lag) * 1e3:.1f} ms")


@pytest.mark.slow
@pytest.mark.parametrize("arguments", [["--offline", "--duration", "2"], ["--duration", "1"]],
                         ids=["offline", "paced"])
def test_the_shipped_config_runs(arguments):
    done = subprocess.run([sys.executable, "-m", "rtctl.cli", "run", CONFIG, *arguments], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "safety: armed throughout, no trips" in done.stdout and "sensor 'wrist'" not in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("sig, wait", [(signal.SIGTERM, 1.5), (signal.SIGKILL, 1.5), (signal.SIGKILL, 0.0)],
                         ids=["SIGTERM", "SIGKILL", "SIGKILL-while-the-emulator-starts"])
def test_a_stopped_or_killed_loop_process_leaves_no_emulator_and_no_shared_block(tmp_path, sig, wait):
    """`rtctl run` on the shipped config, paced, stopped by SIGTERM or killed by SIGKILL 1.5 s into the run, or
    while the emulator starts (tests/emulator_processes.signal_a_run)."""
    signal_a_run(bundled_config_path(CONFIG), tmp_path, sig, wait, "rtctl.hil.netft_sensor", "--feed", "wrist")


@pytest.mark.slow
@pytest.mark.parametrize("pace, how", [(True, signal.SIGSTOP), (True, signal.SIGKILL), (False, signal.SIGSTOP)],
                         ids=["paced-stopped", "paced-killed", "offline-stopped"])
def test_an_emulator_that_stops_or_dies_mid_run_faults_within_max_age_to_the_safe_state(pace, how):
    """The emulator stopped (its port open and silent) or killed (nothing on its port) at cycle 300: the stale
    watchdog trips the run within max_age (0.1 s) of it, on one line naming the sensor, and the robot stays in its
    safe state. Offline the read in lockstep waits for the device once, LOCKSTEP_TIMEOUT of wall time, then lets
    it go: the run goes on to the trip instead of hanging."""
    cfg = shipped(pace=pace, duration=0.6, max_age=0.1)
    loop = build(cfg)
    wrist = loop.sensors[0]
    at = {}

    def strike(cycle, t, state, command):
        if cycle == 300:
            at["cycle"] = cycle
            os.kill(wrist.emulation.process.proc.pid, how)
    loop.hooks.append(strike)
    start = time.monotonic()
    try:
        report = loop.run(duration=0.6)
    finally:
        if how == signal.SIGSTOP:
            os.kill(wrist.emulation.process.proc.pid, signal.SIGCONT)
        wrist.close()
    assert report.tripped and loop.safety.tripped and report.trip_history, report.trip_reason
    trip_cycle, line, rearmed = report.trip_history[0]
    assert rearmed == -1 and "sensor 'wrist': stale: no sample for" in line and "\n" not in line, line
    assert 0 <= (trip_cycle - at["cycle"]) * loop.period <= wrist.options.max_age + 2 * loop.period, trip_cycle
    if not pace:
        assert wrist.lockstep_waits >= 1 and wrist.lockstep_seconds >= LOCKSTEP_TIMEOUT
        assert time.monotonic() - start < 2 * LOCKSTEP_TIMEOUT + 30      # waited once, not every cycle


def listening(pid: int, kind: str) -> list[tuple[str, int]]:
    """The (local address, port) of process ``pid``'s ``kind`` sockets ("udp", "tcp": listening) from /proc."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = []
    for line in open(f"/proc/{pid}/net/{kind}").read().splitlines()[1:]:
        fields = line.split()
        address, port = fields[1].split(":")
        if fields[9] in inodes and (kind == "udp" or fields[3] == "0A"):
            out.append((".".join(str(int(address[k:k + 2], 16)) for k in (6, 4, 2, 0)), int(port, 16)))
    return out


def opened_by_another_user(name: str) -> list[str]:
    outcomes = []
    for opener in (lambda: shared_memory.SharedMemory(name=name), lambda: os.open(f"/dev/shm/{name}", os.O_RDONLY)):
        try:
            opener()
            outcomes.append("opened")
        except PermissionError:
            outcomes.append("refused")
    return outcomes


@pytest.mark.slow
def test_two_sensors_serve_loopback_on_ports_of_their_own_and_their_feeds_are_this_users():
    """Two emulated sensors configured side by side (two runs): each emulator bound its RDT (UDP) and calibration
    (TCP, listening) sockets to 127.0.0.1 only, on the ports it announced, none shared; a uid-65534 child cannot
    open either feed."""
    sensors = [build(shipped(pace=True, duration=0.1)).sensors[0] for _ in range(2)]
    try:
        ports = []
        for sensor in sensors:
            sensor.configure()
            pid, o = sensor.emulation.process.pid, sensor.options
            assert listening(pid, "udp") == [("127.0.0.1", o.rdt_port)] and o.host == "127.0.0.1"
            assert listening(pid, "tcp") == [("127.0.0.1", o.tcp_port)]
            ports += [o.rdt_port, o.tcp_port]
            assert sensor.emulation.feed.mode() == 0o600
            assert as_other_user(opened_by_another_user, sensor.emulation.feed.name) == ["refused", "refused"]
        assert len(set(ports[::2])) == 2 and len(set(ports[1::2])) == 2
    finally:
        for sensor in sensors:
            sensor.close()
    assert all(sensor.emulation.feed is None and sensor.options.rdt_port is None for sensor in sensors)


@pytest.mark.parametrize("table, said", [
    ({"host": "192.168.1.1"}, "host '192.168.1.1': the emulated device's host is the one its emulator announces"),
    ({"rdt_port": 49152}, "rdt_port 49152: the emulated device's rdt_port is the one its emulator announces"),
    ({"rate": 8000.0}, "rate"),
    ({"frame": "world"}, "frame"),
])
def test_an_address_or_a_bad_value_is_refused_in_one_line(table, said):
    raw = tomllib.loads(bundled_config_path(CONFIG).read_text())
    raw["sensors"][0].update(table)
    with pytest.raises(ConfigError) as refused:
        build(validate(raw, "wrist.toml"))
    message = str(refused.value)
    assert message.startswith("wrist.toml: [[sensors]] 0 ('wrist')") and said in message and "\n" not in message


def test_the_datasheet_options_reach_the_emulator_as_given():
    raw = tomllib.loads(bundled_config_path(CONFIG).read_text())
    raw["sensors"][0].update(rate=2000.0, noise_scale=0.5, latency=0.002, buffer=3, seed=7)
    wrist = build(validate(raw, "wrist.toml")).sensors[0]
    args = wrist.emulator_arguments("rtctl-truth-0")
    given = dict(zip(args[::2], args[1::2]))
    assert {k: given[k] for k in ("--feed", "--clock", "--seed", "--rate", "--buffer", "--latency",
                                  "--noise-scale")} == {
        "--feed": "rtctl-truth-0", "--clock": "wall", "--seed": "7", "--rate": "2000.0", "--buffer": "3",
        "--latency": "0.002", "--noise-scale": "0.5"}
    assert int(given["--parent"]) == os.getpid()


@pytest.mark.slow
def test_a_cycle_with_the_emulated_sensor_keeps_nothing():
    """Offline, streaming (the plant's clock, lockstep on): what the truth's writing, the device's reading and
    the lockstep check keep from cycle to cycle is nothing (allocation_counter.retained_per_cycle)."""
    import rtctl.drivers.netft.driver as netft
    import rtctl.hil.emulated_device as emulated_device
    import rtctl.hil.emulated_netft as emulated_netft
    import rtctl.hil.truth_feed as truth_feed
    import rtctl.hil.wrench_feed as wrench_feed

    from allocation_counter import retained_per_cycle

    loop = build(shipped(pace=False, duration=0.05))
    wrist = loop.sensors[0]
    try:
        loop.run(duration=0.05)
        wrist.activate()
        assert retained_per_cycle(loop, [netft, emulated_device, emulated_netft, truth_feed, wrench_feed]) == []
        assert not wrist.health.fault, wrist.health.fault_reason
    finally:
        wrist.close()
