"""The ``mip`` sensor backend against the emulated 3DM-GX5-25 in its own process, over a pty.

Readings in SI and in the z-up world, device time stamps, the emulated noise against the datasheet's
density (Allan variance at the message period, bounded by the run's own sample count), the truth feed end to
end, and the faults: stale (emulator killed), a checksum burst, another model or firmware, NaN, saturation.
"""
from __future__ import annotations

import contextlib
import math
import signal
import time

import numpy as np
import pytest
from scipy import stats

from rtctl.drivers.mip import DeviceError, MipImu
from rtctl.hil.dynamixel_emulator import dxl_arm2
from rtctl.hil.imu_noise import GX5_25, G0
from rtctl.hil.mip_imu import MipImuProcess
from rtctl.hil.truth_feed import GRAVITY, OMEGA, QUAT, SIZE, TruthFeed
from rtctl.model import quaternion_to_matrix, rpy_to_matrix

pytestmark = pytest.mark.slow     # each test starts an emulator process


@contextlib.contextmanager
def streaming(port: str, **options):
    options.setdefault("max_age", 1.0)   # the stop test's subject; elsewhere a busy machine's pause must not trip it
    imu = MipImu(dxl_arm2(), MipImu.Options(name="imu", frame="link1", port=port, **options))
    imu.warm(None)
    imu.configure()
    imu.activate()
    try:
        yield imu
    finally:
        imu.deactivate()
        imu.close()


def collect(imu, seconds: float, until=None):
    """(loop times, readings, device stamps) of the fresh reads over ``seconds`` (or until ``until(imu)``)."""
    times, values, stamps = [], [], []
    end = time.monotonic() + seconds
    while time.monotonic() < end and not (until and until(imu)):
        now = time.monotonic()
        if imu.read(now):
            times.append(now)
            values.append(imu.reading.values.copy())
            stamps.append(imu.reading.device_stamp)
        time.sleep(5e-4)
    return np.array(times), np.array(values), np.array(stamps)


def test_readings_are_si_in_the_world_with_the_devices_stamps():
    with MipImuProcess() as emu, streaming(emu.port, rate=250.0, model_name="3DM-GX5-25", firmware="1.1.08") as imu:
        assert imu.base_rate == 500 and imu.decimation == 2 and imu.device_info.serial_number == "6251.00000"
        times, values, stamps = collect(imu, 1.5)
    assert not imu.health.fault and imu.health.corrupt == 0
    assert len(values) > 0.5 * 1.5 * 250
    steps = np.diff(stamps)                       # the device's clock: whole message periods
    assert np.all(np.abs(steps / 0.004 - np.round(steps / 0.004)) < 1e-6) and np.all(steps > 0)
    # at rest, upright (z down): specific force up the world's z is -1 g on the device's z; attitude a half turn
    n = len(values)
    accel, gyro = GX5_25.accel, GX5_25.gyro
    f_bound = 5 * accel.initial_bias + 5 * accel.noise_density * math.sqrt(250 / n) + accel.resolution
    w_bound = 5 * gyro.initial_bias + 5 * gyro.noise_density * math.sqrt(250 / n) + gyro.resolution
    assert np.all(np.abs(values[:, :3].mean(0) - [0, 0, -G0]) < f_bound)
    assert np.all(np.abs(values[:, 3:6].mean(0)) < w_bound)
    assert np.allclose(values[:, 6:], [1, 0, 0, 0], atol=1e-7)


def allan_variance_at_period(y, first):
    """Allan variance at the sample period, half the mean of ``(y[i + 1] - y[i])^2`` over the indices ``first``
    (``i`` and ``i + 1`` consecutive device samples), and its equivalent degrees of freedom for white noise.

    Two adjacent differences share a sample: for white noise of variance s^2 a squared difference has variance
    8 s^4 and two adjacent ones a covariance 2 s^4, so the estimate's relative variance is (2M + A) / M^2 for M
    differences of which A pairs are adjacent -- 3/M when all are (the edf 2M/3 that Howe, Allan and Barnes,
    "Properties of signal sources and measurement methods", 1981, give for white FM noise at m = 1), not the 2/M
    of independent pairs."""
    d = y[first + 1] - y[first]
    m = len(first)
    adjacent = int(np.count_nonzero(np.diff(first) == 1))
    return 0.5 * np.mean(d * d, axis=0), 2.0 * m * m / (2 * m + adjacent)


def test_emulated_noise_has_the_datasheets_density():
    """White noise of density N sampled over 1/f has Allan variance N^2 f at tau = 1/f (IEEE Std 952-1997,
    Annex C), plus the resolution's res^2/12 (the bias instability moves by far less in a second). The estimate
    over this run's differences of consecutive device samples (the reader misses some on a busy machine: their
    stamps say which) is chi-square distributed with the equivalent degrees of freedom of
    :func:`allan_variance_at_period`, divided by them: the bounds are its quantiles at 5 normal sigmas."""
    rate = 500.0
    with MipImuProcess("--seed", "7") as emu, streaming(emu.port, rate=rate) as imu:
        times, values, stamps = collect(imu, 2.5)
    steps = np.round(np.diff(stamps) * rate).astype(int)
    keep = np.flatnonzero(steps == 1)            # consecutive device samples only
    assert len(keep) > 200
    avar, edf = allan_variance_at_period(values[:, :6], keep)
    tail = stats.norm.sf(5.0)
    low, high = stats.chi2.ppf(tail, edf) / edf, stats.chi2.isf(tail, edf) / edf
    for k, e in enumerate([GX5_25.accel] * 3 + [GX5_25.gyro] * 3):
        expected = e.noise_density ** 2 * rate + e.resolution ** 2 / 12
        assert low < avar[k] / expected < high, (k, avar[k], expected, edf, low, high)


def test_the_truth_feed_reaches_the_reading_through_ned_and_back():
    feed = TruthFeed.create()
    r = rpy_to_matrix([0.3, -0.2, 1.0])
    from rtctl.dynamics.spatial import matrix_quaternion
    truth = np.zeros(SIZE)
    truth[QUAT:QUAT + 4] = matrix_quaternion(tuple(r.ravel()))
    truth[OMEGA:OMEGA + 3] = (0.1, 0.2, 0.3)
    truth[GRAVITY:GRAVITY + 3] = (0, 0, -9.81)
    feed.write(truth)
    try:
        with MipImuProcess("--truth", feed.name, "--accel-initial-bias", "0", "--gyro-initial-bias", "0") as emu, \
                streaming(emu.port, rate=250.0) as imu:
            _, values, _ = collect(imu, 1.0)
    finally:
        feed.close()
    n = len(values)
    assert n > 100
    w_bound = 5 * GX5_25.gyro.noise_density * math.sqrt(250 / n) + GX5_25.gyro.resolution + 5e-4
    f_bound = 5 * GX5_25.accel.noise_density * math.sqrt(250 / n) + GX5_25.accel.resolution + 5e-3
    assert np.all(np.abs(values[:, 3:6].mean(0) - r.T @ [0.1, 0.2, 0.3]) < w_bound)
    assert np.all(np.abs(values[:, :3].mean(0) - r.T @ [0, 0, 9.81]) < f_bound)
    assert np.allclose(quaternion_to_matrix(values[-1, 6:]), r, atol=1e-6)


@pytest.mark.parametrize("how, reason", [("kill", "failed: Input/output error (the device is gone)"),
                                         ("SIGSTOP", "stale: no sample for")])
def test_a_device_that_stops_faults_within_max_age(how, reason):
    """Killed, the emulator closes the pty: the next read fails; stopped (SIGSTOP), the port stays open and
    silent: the stale watchdog trips. Either way within max_age (0.1 s) of the last sample, give or take a
    scheduler's pause of this test's own reads (0.1 s at load 4.5 on two cores)."""
    with MipImuProcess() as emu, streaming(emu.port, rate=250.0, max_age=0.1) as imu:
        times, _, _ = collect(imu, 0.5)
        assert len(times) and not imu.health.fault
        if how == "kill":
            emu.kill()
        else:
            emu.proc.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        collect(imu, 2.0, until=lambda s: s.health.fault)
        faulted = time.monotonic()
        if how == "SIGSTOP":
            emu.proc.send_signal(signal.SIGCONT)
    assert imu.health.fault, imu.health
    assert faulted - stopped < 0.1 + 0.1, (faulted - stopped, imu.health.fault_reason)
    assert imu.health.fault_reason.startswith("sensor 'imu': ") and reason in imu.health.fault_reason
    assert "\n" not in imu.health.fault_reason


def test_a_burst_of_bad_checksums_faults_in_one_line():
    with MipImuProcess("--corrupt-from", "40", "--corrupt-count", "8") as emu, \
            streaming(emu.port, rate=250.0, max_corrupt_burst=5) as imu:
        collect(imu, 3.0, until=lambda s: s.health.fault)
    assert imu.health.fault and imu.health.corrupt >= 5
    reason = imu.health.fault_reason
    assert reason.startswith("sensor 'imu': ") and "consecutive MIP packets" in reason and "checksum" in reason
    assert "\n" not in reason


def test_a_device_of_another_model_or_firmware_is_refused_in_one_line():
    with MipImuProcess("--model-name", "3DM-CV7-AHRS", "--firmware-version", "1205") as emu:
        for options, named in (({"model_name": "3DM-GX5-25"}, "'3DM-CV7-AHRS' where '3DM-GX5-25' is configured"),
                               ({"firmware": "1.1.08"}, "firmware 1.2.05 where 1.1.08 is configured")):
            imu = MipImu(dxl_arm2(), MipImu.Options(name="imu", frame="link1", port=emu.port, **options))
            with pytest.raises(DeviceError) as refused:
                imu.configure()
            assert imu.serial is None          # the port is closed again: the next configure can open it
            message = str(refused.value)
            assert named in message and emu.port in message and "\n" not in message
            assert imu.error_reason    # the lifecycle is in its error state


@pytest.mark.parametrize("args, reason", [
    (("--nan-from", "30"), "scaled gyro x is nan"),
    (("--static-rate", "6,0,0"), "scaled gyro x saturated"),      # 6 rad/s past the +-300 deg/s range
])
def test_nan_and_saturated_samples_fault_in_one_line(args, reason):
    with MipImuProcess(*args) as emu, streaming(emu.port, rate=250.0) as imu:
        collect(imu, 3.0, until=lambda s: s.health.fault)
    assert imu.health.fault and reason in imu.health.fault_reason, imu.health.fault_reason
    assert imu.health.fault_reason.startswith("sensor 'imu': ") and "\n" not in imu.health.fault_reason
