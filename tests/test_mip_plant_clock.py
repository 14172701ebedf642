"""The emulated MIP IMU on the simulated plant's time (hil/device_clock.py, hil/mip_imu.py --clock plant) and its
compiled sample (hil/mip_sample.py).

The compiled packet is the codec's bytes; the sample is the rigid-body truth in the sensor frame. On the plant's
clock the device sends one sample per device period of plant time whether the plant runs faster or slower than
real time, each the truth of the plant step its tick falls on, never before its latency has passed in plant
time; a plant standing still gets no samples and costs the emulator little; the latency the emulator adds in
plant time is measured against the wall time it needs.
"""
from __future__ import annotations

import math
import os
import struct
import time

import numpy as np
import pytest

from rtctl.drivers.mip import MipImu
from rtctl.drivers.mip import protocol as P
from rtctl.drivers.mip import stream as S
from rtctl.drivers.mip.driver import WORLD_FROM_NED, imu_values
from rtctl.dynamics.spatial import matrix_quaternion
from rtctl.hil.dynamixel_emulator import dxl_arm2
from rtctl.hil.imu_noise import GX5_25, AxisErrors, SensorErrors
from rtctl.hil.mip_device import IMU_FIELDS
from rtctl.hil.mip_imu import MipImuProcess
from rtctl.hil.mip_sample import M_SIZE, MAX_DATA_PACKET, NED_FROM_WORLD, body_truth, pack_data
from rtctl.hil.truth_feed import ACC, GRAVITY, OMEGA, QUAT, SIZE, T, TruthFeed
from rtctl.model import quaternion_to_matrix, rpy_to_matrix


def _codec_packet(fields, m, dt, tow, week):
    body = {P.SCALED_ACCEL: struct.pack(">3f", *m[0:3]), P.SCALED_GYRO: struct.pack(">3f", *m[3:6]),
            P.DELTA_THETA: struct.pack(">3f", *(m[3:6] * dt)), P.DELTA_VELOCITY: struct.pack(">3f", *(m[0:3] * dt)),
            P.COMP_QUATERNION: struct.pack(">4f", *m[6:10]), P.GPS_TIMESTAMP: struct.pack(">dHH", tow, week, 0)}
    return P.packet(P.SENSOR_DATA_SET, *(P.field(d, body[d]) for d in fields))


def test_the_compiled_packet_is_the_codecs_bytes_for_any_fields_and_values():
    """Every order and subset of the IMU fields, values from normal to NaN, infinities, -0 and subnormals: the
    bytes are those the codec builds with struct, and the stream parser reads them back."""
    rng = np.random.default_rng(11)
    out = np.zeros(MAX_DATA_PACKET, dtype=np.uint8)
    f32, f64 = np.zeros(1, dtype=np.float32), np.zeros(1)
    specials = [np.nan, np.inf, -np.inf, -0.0, 1e-40, 3.4e38]
    for trial in range(300):
        fields = [int(d) for d in rng.permutation(IMU_FIELDS)[:rng.integers(1, len(IMU_FIELDS) + 1)]]
        m = rng.normal(0, 10 ** rng.uniform(-3, 3), M_SIZE)
        if trial % 3 == 0:
            m[rng.integers(M_SIZE)] = specials[trial % len(specials)]
        dt, tow, week = 10 ** rng.uniform(-4, -1), rng.uniform(0, P.SECONDS_PER_WEEK), int(rng.integers(0, 4000))
        n = pack_data(np.array(fields, dtype=np.int64), m, dt, tow, week, out, f32, f32.view(np.uint32), f64,
                      f64.view(np.uint64))
        assert out[:n].tobytes() == _codec_packet(fields, m, dt, tow, week), (trial, fields)
        buf, sample, counters = np.zeros(S.BUFFER_BYTES, dtype=np.uint8), S.new_sample(), S.new_counters()
        buf[:n] = out[:n]
        S.scan(buf, n, sample, counters)
        assert counters[S.C_SAMPLES] == 1 and counters[S.C_CORRUPT] == 0


def test_the_sample_is_the_truth_in_the_sensor_frame_and_its_attitude_comes_back_from_ned():
    """``R^T (a - g)`` and ``R^T omega`` against NumPy with rtctl's quaternion_to_matrix; the NED quaternion, as
    the mip backend converts it back, is the true orientation."""
    rng = np.random.default_rng(12)
    force, rate, sample, values = np.zeros(3), np.zeros(3), np.zeros(M_SIZE), np.zeros(10)
    raw = S.new_sample()
    for _ in range(50):
        truth = np.zeros(SIZE)
        r = rpy_to_matrix(rng.uniform(-np.pi, np.pi, 3))
        truth[QUAT:QUAT + 4] = matrix_quaternion(tuple(r.ravel()))
        truth[ACC:ACC + 3], truth[OMEGA:OMEGA + 3] = rng.normal(0, 5, 3), rng.normal(0, 2, 3)
        truth[GRAVITY:GRAVITY + 3] = (0, 0, -9.81)
        body_truth(truth, NED_FROM_WORLD, force, rate, sample)
        r = quaternion_to_matrix(truth[QUAT:QUAT + 4])
        assert np.allclose(force, r.T @ (truth[ACC:ACC + 3] - truth[GRAVITY:GRAVITY + 3]), atol=1e-12)
        assert np.allclose(rate, r.T @ truth[OMEGA:OMEGA + 3], atol=1e-12)
        raw[S.S_PRESENT] = S.P_ACCEL | S.P_GYRO | S.P_QUAT
        raw[S.S_ACCEL:S.S_ACCEL + 6] = 0.0
        raw[S.S_QUAT:S.S_QUAT + 4] = sample[6:10]
        S.merge_packet(raw)
        assert sample[6] >= 0
        assert imu_values(raw, values, False, 0.002, 8.0, 5.0, np.array(WORLD_FROM_NED)) == -1
        assert np.allclose(quaternion_to_matrix(values[6:]), r, atol=1e-12)


def test_the_datasheet_errors_quantise_and_clip_exactly():
    """Without noise or biases a measurement is the truth rounded to the resolution (half to even, as
    np.round) and clipped at the range."""
    e = AxisErrors(noise_density=0.0, bias_instability=0.0, initial_bias=0.0, resolution=0.01, range=2.0)
    errors, out = SensorErrors(e, np.random.default_rng(0)), np.zeros(3)
    for truth in ([0.123456, -1.9949, 7.0], [0.005, 0.015, -2.5]):
        errors.apply(np.array(truth), 0.002, out)
        assert np.array_equal(out, np.clip(np.round(np.array(truth) / 0.01) * 0.01, -2.0, 2.0))


EXACT = ("--accel-noise-density", "0", "--gyro-noise-density", "0", "--accel-bias-instability", "0",
         "--gyro-bias-instability", "0", "--accel-initial-bias", "0", "--gyro-initial-bias", "0",
         "--accel-resolution", "0", "--gyro-resolution", "0")
LATENCY, STEP, RATE = GX5_25.latency, 1e-3, 500.0


def _cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")     # utime + stime


def _truth(t: float, out) -> None:
    """The plant's truth at time t: level, at rest but for a body rate about x that names its step, 1 + t."""
    out[:] = 0.0
    out[T], out[QUAT + 3], out[OMEGA], out[GRAVITY + 2] = t, 1.0, 1.0 + t, -9.81


@pytest.mark.slow
@pytest.mark.parametrize("speed", [4.0, 0.25], ids=["4x-real-time", "quarter-real-time"])
def test_one_sample_per_device_period_of_plant_time_each_of_its_own_step(speed):
    """A plant stepped at 1 ms, 4 times faster and 4 times slower than real time, its truth written before each
    read as the mip_emulated backend writes it: the device's stamps are plant times, every 2 ms of plant time
    one sample (none lost, none twice), each the truth of the step its tick falls on (the rate names the step),
    none read before its 1 ms latency has passed in plant time -- but the first: resumed while the plant's time
    stood still, the stream sends the sample of plant time 0 at once, right behind the resume's ACK, and the
    master keeps it. The latency the emulator adds beyond that is measured: its median at most a step plus the
    run's speed times the wall time of a poll and a scheduler's slice."""
    feed, values = TruthFeed.create(), np.zeros(SIZE)
    _truth(0.0, values)
    feed.write(values)
    stamps, rates, merged, added = [], [], [], []
    try:
        with MipImuProcess("--truth", feed.name, "--clock", "plant", *EXACT, new_session=True) as emu:
            imu = MipImu(dxl_arm2(), MipImu.Options(name="imu", frame="link1", port=emu.port, rate=RATE, max_age=60))
            imu.warm(None)
            imu.configure()
            imu.activate()
            steps = 400
            start = time.perf_counter()
            for k in range(1, steps + 1):
                t = k * STEP
                _truth(t, values)
                feed.write(values)
                if imu.read(t):
                    stamps.append(imu.reading.device_stamp)
                    rates.append(imu.reading.angular_rate[0])
                    merged.append(int(imu.sample[S.S_MERGED]))
                    added.append(t - imu.reading.device_stamp - LATENCY)
                wake = start + k * STEP / speed
                if speed < 1:
                    time.sleep(max(0.0, wake - time.perf_counter()))
                while time.perf_counter() < wake:
                    pass
            wall = time.perf_counter() - start
            time.sleep(0.2)                               # the plant stands still: what was due has been sent
            if imu.read(steps * STEP):
                stamps.append(imu.reading.device_stamp)
                rates.append(imu.reading.angular_rate[0])
                merged.append(int(imu.sample[S.S_MERGED]))
            samples = int(imu.counters[S.C_SAMPLES])
            imu.deactivate()
            imu.close()
        stats = emu.stats
    finally:
        feed.close()
    stamps, rates, added = np.array(stamps), np.array(rates), np.array(added)
    last_due = math.floor((steps * STEP - LATENCY) * RATE + 1e-6) / RATE
    # every tick up to the last due, and tick 0: the stream's first sample, sent behind the resume's ACK
    assert stamps[-1] == pytest.approx(last_due, abs=1e-12) and samples == round(last_due * RATE) + 1, \
        (stamps[-1], samples)
    assert np.all(np.diff(stamps) > 0) and np.allclose(stamps * RATE, np.round(stamps * RATE), atol=1e-9)
    # the step on the tick; a read that found several samples gives their mean, each the step on its tick
    assert sum(merged) == samples
    due = [np.float32(1.0 + stamp - j / RATE) for stamp, n in zip(stamps, merged) for j in range(n - 1, -1, -1)]
    means, first = [], 0
    for n in merged:
        means.append(sum(float(r) for r in due[first:first + n]) / n)
        first += n
    assert np.array_equal(rates, means), np.flatnonzero(rates != np.array(means))
    assert added.min() >= -1e-9                                                      # never before its latency
    measured_speed = steps * STEP / wall
    bound = STEP + measured_speed * (2e-4 + 0.005)      # a loop cycle, then the emulator's poll and a time slice
    print(f"speed {speed:g} (measured {measured_speed:.2f}): added latency in plant time median "
          f"{np.median(added) * 1e3:.2f} ms, max {added.max() * 1e3:.2f} ms (bound on the median {bound * 1e3:.2f} ms)"
          f"; emulator {stats}")
    assert np.median(added) <= bound
    assert stats["truth_misses"] == 0 and stats["lag_skips"] == 0 and stats["dropped_bytes"] == 0


@pytest.mark.slow
def test_a_plant_standing_still_gets_no_samples_and_costs_the_emulator_little():
    """The master reads on while the plant's time stands still: no sample (its reads do not drive the device),
    and the emulator, polling the feed ever more slowly, spends well under a tenth of a core."""
    feed, values = TruthFeed.create(), np.zeros(SIZE)
    _truth(0.0, values)
    feed.write(values)
    try:
        with MipImuProcess("--truth", feed.name, "--clock", "plant", new_session=True) as emu:
            imu = MipImu(dxl_arm2(), MipImu.Options(name="imu", frame="link1", port=emu.port, rate=RATE, max_age=60))
            imu.warm(None)
            imu.configure()
            imu.activate()
            for k in range(1, 51):
                _truth(k * STEP, values)
                feed.write(values)
                imu.read(k * STEP)
                time.sleep(STEP)
            time.sleep(0.3)
            imu.read(0.05)
            before, cpu = int(imu.counters[S.C_SAMPLES]), _cpu_seconds(emu.proc.pid)
            end = time.monotonic() + 1.0
            while time.monotonic() < end:
                imu.read(0.05)
                time.sleep(1e-3)
            cpu = _cpu_seconds(emu.proc.pid) - cpu
            after = int(imu.counters[S.C_SAMPLES])
            imu.deactivate()
            imu.close()
    finally:
        feed.close()
    assert before == math.floor((0.05 - LATENCY) * RATE + 1e-6) + 1 and after == before   # by t = 0.05, and tick 0
    print(f"emulator CPU over 1 s of a still plant: {cpu:.3f} s")
    assert cpu < 0.1
