"""The Net F/T emulator (rtctl.hil.netft_sensor) in its own process, read by the netft backend and by a
third-party client (the NetFT package from PyPI, unmodified, on the device's port 49152 of a loopback address).

Sections of ATI's *Net F/T Installation and Operation Manual* (9620-05-NET FT, rev. 11) each test holds to:

* sec. 11.5-11.6: the backend reads the calibration over TCP and converts counts to N and N m; the mean of
  the readings of a constant load is the load within 4 standard errors, their spread the Gamma SI-130-10's
  resolution (1/40 N, 1/20 N, 1/800 N m) within 25 %;
* sec. 10.1: ft_sequence (7000 per second) is the reading's device clock: it rises with every record and
  spans the wall time the records took within 20 %;
* sec. 10.1, Table 10.1, command 0x0042: set software bias zeroes the reading (its mean within 5 standard
  deviations of zero), for our backend and for the third-party client;
* Table 10.1, 0x0003: buffered streaming (4 records a datagram) reads the same, several records a read;
* sec. 10: up to 7000 records per second: the emulator's ticks (records sent and ticks it was late for)
  account for 7000 per second of streaming within 2 %;
* the status code: an injected error and a load beyond the range (transducer saturation) fault the sensor
  with one line naming the bits;
* a stalled device (the emulator stopped with SIGSTOP) trips the stale watchdog within max_age of its last
  record, plus the longest gap between two reads of this run (the machine's scheduling).
"""
from __future__ import annotations

import os
import random
import signal
import time

import numpy as np
import pytest

import rtctl
from rtctl.drivers.netft import NetFT
from rtctl.drivers.netft import protocol as P
from rtctl.hil.netft_sensor import GAMMA_SI_130_10, NetFTProcess
from rtctl.model.urdf import load_urdf

pytestmark = pytest.mark.slow
LOAD = np.array([0.1, -0.2, 0.3, 5.0, -10.0, 40.0])            # [torque; force], N m and N
SIGMA = np.array(GAMMA_SI_130_10["resolution"][3:] + GAMMA_SI_130_10["resolution"][:3])   # [torque; force]
MODEL = load_urdf(rtctl.bundled_model_path("arm7"))


def sensor_for(emulator, **options):
    sensor = NetFT(MODEL, NetFT.Options(name="wrist", frame="tool", host="127.0.0.1", rdt_port=emulator.rdt_port,
                                        tcp_port=emulator.tcp_port, **options))
    sensor.configure()
    sensor.activate()
    return sensor


def readings(sensor, seconds, period=0.001):
    """(wall times, wrenches, device stamps) of the fresh reads over ``seconds``."""
    t0 = time.monotonic()
    out = []
    while (now := time.monotonic() - t0) < seconds:
        if sensor.read(now):
            out.append((now, sensor.reading.wrench.copy(), sensor.reading.device_stamp))
        time.sleep(period)
    assert not sensor.health.fault, sensor.health.fault_reason
    return np.array([x[0] for x in out]), np.array([x[1] for x in out]), np.array([x[2] for x in out])


def assert_load(wrenches, load):
    n = len(wrenches)
    assert n > 50
    assert np.all(np.abs(wrenches.mean(axis=0) - load) <= 4 * SIGMA / np.sqrt(n) + 1e-6), wrenches.mean(axis=0)
    assert np.all(np.abs(wrenches.std(axis=0) / SIGMA - 1) < 0.25), wrenches.std(axis=0) / SIGMA


def test_the_backend_reads_the_calibrated_load_its_noise_and_the_device_clock():
    with NetFTProcess("--wrench", ",".join(map(str, LOAD)), "--rate", "1000") as emulator:
        sensor = sensor_for(emulator)
        assert sensor.calibration == P.Calibration(2, 3, 1_000_000, 1_000_000)
        wall, wrenches, stamps = readings(sensor, 0.4)
        assert_load(wrenches, LOAD)
        assert np.all(np.diff(stamps) > 0)
        assert abs((stamps[-1] - stamps[0]) / (wall[-1] - wall[0]) - 1) < 0.2
        sensor.bias()
        time.sleep(0.02)
        _, after, _ = readings(sensor, 0.3)
        assert np.all(np.abs(after.mean(axis=0)) <= 5 * SIGMA), after.mean(axis=0)
        sensor.deactivate()
        sensor.close()
    assert emulator.stats["biases"] == 1 and emulator.stats["calibration_reads"] == 1


def test_buffered_streaming_reads_the_same():
    with NetFTProcess("--wrench", ",".join(map(str, LOAD)), "--rate", "2000", "--buffer", "4") as emulator:
        sensor = sensor_for(emulator, buffered=True)
        _, wrenches, _ = readings(sensor, 0.3)
        assert_load(wrenches, LOAD)
        sensor.deactivate()
        counts = sensor.counters()
        sensor.close()
    assert emulator.stats["datagrams"] * 4 <= emulator.stats["records"] + 3
    assert len(wrenches) < counts["rdt_records"] <= emulator.stats["records"] - counts["rdt_lost"]


def test_the_third_party_client_reads_the_emulator_on_the_devices_port():
    NetFTClient = pytest.importorskip("NetFT").Sensor
    for _ in range(5):      # the device's fixed port 49152, on a loopback address no other test is likely to use
        host = f"127.{random.randint(1, 254)}.{random.randint(1, 254)}.{random.randint(2, 254)}"
        try:
            emulator = NetFTProcess("--wrench", ",".join(map(str, LOAD)), "--host", host, "--rdt-port", "49152")
            break
        except RuntimeError:
            continue
    with emulator:
        client = NetFTClient(host)
        client.sock.settimeout(5.0)
        counts = np.array([client.getMeasurement() for _ in range(200)], dtype=float)
        fx_to_tz = np.concatenate([LOAD[3:], LOAD[:3]])
        sigma = np.concatenate([SIGMA[3:], SIGMA[:3]])
        assert np.all(np.abs(counts.mean(axis=0) / 1e6 - fx_to_tz) <= 4 * sigma / np.sqrt(200) + 1e-6)
        client.send(P.SET_SOFTWARE_BIAS)
        client.startStreaming(handler=False)
        biased = np.array([client.receive() for _ in range(300)], dtype=float)[50:] / 1e6
        client.stopStreaming()
        assert np.all(np.abs(biased.mean(axis=0)) <= 5 * sigma)
    assert emulator.stats["bad_requests"] == 0 and emulator.stats["biases"] == 1


def test_the_emulator_keeps_the_devices_top_rate():
    with NetFTProcess("--wrench", ",".join(map(str, LOAD)), "--rate", "7000", "--buffer", "7") as emulator:
        sensor = sensor_for(emulator, buffered=True)
        start = time.monotonic()
        readings(sensor, 0.5)
        sensor.deactivate()
        streamed = time.monotonic() - start
        sensor.close()
    ticks = emulator.stats["records"] + emulator.stats["late_ticks"]
    assert abs(ticks / (7000 * streamed) - 1) < 0.02 + 50 / (7000 * streamed), (ticks, streamed)


@pytest.mark.parametrize("arguments, line", [
    (("--inject-status", "0x80000004@0.2"), "0x80000004 (internal temperature error)"),
    (("--wrench", "0,0,0,0,0,450"), "0x80020000 (transducer saturation or A/D error)"),
])
def test_a_status_error_faults_the_sensor_with_one_line(arguments, line):
    with NetFTProcess(*arguments) as emulator:
        sensor = sensor_for(emulator)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 5.0 and not sensor.health.fault:
            sensor.read(time.monotonic() - t0)
            time.sleep(0.001)
        sensor.close()
    where = f"127.0.0.1:{emulator.rdt_port}"
    assert sensor.health.fault_reason == f"sensor 'wrist': Net F/T at {where} reports status {line}"


def test_a_stalled_device_trips_the_stale_watchdog_within_max_age():
    max_age = 0.05
    with NetFTProcess("--wrench", ",".join(map(str, LOAD))) as emulator:
        sensor = sensor_for(emulator, max_age=max_age)
        t0 = time.monotonic()
        calls, last_fresh = [], None
        while time.monotonic() - t0 < 0.3:
            now = time.monotonic() - t0
            calls.append(now)
            if sensor.read(now):
                last_fresh = now
            time.sleep(0.001)
        os.kill(emulator.pid, signal.SIGSTOP)
        while time.monotonic() - t0 < 3.0 and not sensor.health.fault:
            now = time.monotonic() - t0
            calls.append(now)
            if sensor.read(now):
                last_fresh = now
            time.sleep(0.001)
        sensor.close()
    assert sensor.health.fault_reason.startswith("sensor 'wrist': stale: no sample for ")
    assert calls[-1] - last_fresh <= max_age + np.max(np.diff(calls))
