"""Several MIP data packets in one read lose no motion (drivers/mip/driver.py, stream.py).

Delta theta and delta velocity (3DM-GX5 DCP 5.1.5 and 5.1.6, 0x80,0x07 and 0x80,0x08) are integrals over the
message period: a reading made of k packets is their sum over k periods, which the values below (float32 and
their sums exact, the period a power of two) make exact to the last bit. Scaled accel and gyro (DCP 5.1.1 and
5.1.2) are instantaneous: their mean. A bad value in an older packet of the batch faults as in the newest.
The driver's own path runs over a pty whose other end plays the device.
"""
from __future__ import annotations

import contextlib
import os
import struct
import time

import numpy as np
import pytest

from rtctl.drivers.mip import MipImu
from rtctl.drivers.mip import protocol as P
from rtctl.drivers.mip import stream as S
from rtctl.drivers.mip.driver import SATURATED, WORLD_FROM_NED, append_and_scan, device_seconds, imu_values
from rtctl.hil.dynamixel_emulator import dxl_arm2

PERIOD = 2.0 ** -9     # s: a message period (1/512) that k periods divide exactly
U = 2.0 ** -10         # the unit of the deltas below (rad, g s)
DTHETA = [(1 * U, -2 * U, 3 * U), (3 * U, -2 * U, 0.0), (5 * U, -2 * U, 0.0)]   # sums 9, -6, 3 U
DVEL = [(2 * U, 0.0, -6 * U), (2 * U, 0.0, -6 * U), (2 * U, 6 * U, -6 * U)]     # sums 6, 6, -18 U
ACCEL = [(0.5, -1.0, 0.25), (1.0, -1.0, 0.25), (1.5, -1.0, 0.25)]               # means 1, -1, 0.25 g
GYRO = [(0.25, 0.0, -3.0), (0.5, 0.0, -3.0), (0.75, 0.0, -3.0)]                 # means 0.5, 0, -3 rad/s
TOW = [100.0, 100.0 + 2 * PERIOD, 100.0 + 4 * PERIOD]
QUAT = [(1.0, 0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)]      # NED, w x y z


def data_packet(k: int, accel=None, gyro=None) -> bytes:
    vec = lambda v: struct.pack(">3f", *v)   # noqa: E731
    return P.packet(P.SENSOR_DATA_SET, P.field(P.SCALED_ACCEL, vec(accel or ACCEL[k])),
                    P.field(P.SCALED_GYRO, vec(gyro or GYRO[k])), P.field(P.DELTA_THETA, vec(DTHETA[k])),
                    P.field(P.DELTA_VELOCITY, vec(DVEL[k])), P.field(P.COMP_QUATERNION, struct.pack(">4f", *QUAT[k])),
                    P.field(P.GPS_TIMESTAMP, struct.pack(">dHH", TOW[k], 2300, 3)))


def read_once(wire: bytes):
    buf = np.zeros(S.BUFFER_BYTES + P.MAX_PACKET, dtype=np.uint8)
    sample, counters = S.new_sample(), S.new_counters()
    rx = np.frombuffer(wire, dtype=np.uint8).copy()
    append_and_scan(buf, 0, rx, len(rx), sample, counters)
    return sample, counters


def test_deltas_of_k_packets_are_their_summed_integral_over_their_summed_interval_exactly():
    sample, counters = read_once(b"".join(data_packet(k) for k in range(3)))
    assert counters[S.C_SAMPLES] == 3 and sample[S.S_MERGED] == 3
    values = np.zeros(10)
    assert imu_values(sample, values, True, PERIOD, 8.0, 5.0, np.array(WORLD_FROM_NED)) == -1
    # 9 U / (3 * 2 U) = 1.5 rad/s, and so on; the newest packet alone would give 2.5, -1, 0
    assert values[3:6].tolist() == [1.5, -1.0, 0.5]
    assert values[:3].tolist() == [1.0 * P.STANDARD_GRAVITY, 1.0 * P.STANDARD_GRAVITY, -3.0 * P.STANDARD_GRAVITY]
    # the attitude and the device's time are the newest packet's: its NED yaw of 180 deg after the half turn
    # about north from NED to the world is a half turn about y (the older packets' would be one about x)
    assert values[6:].tolist() == [0.0, -1.0, 0.0, 0.0]
    assert device_seconds(sample) == 2300 * P.SECONDS_PER_WEEK + TOW[2]


def test_scaled_samples_of_k_packets_are_their_mean_and_a_taken_batch_starts_anew():
    sample, _ = read_once(b"".join(data_packet(k) for k in range(3)))
    values = np.zeros(10)
    assert imu_values(sample, values, False, PERIOD, 8.0, 5.0, np.array(WORLD_FROM_NED)) == -1
    assert values[:3].tolist() == [1.0 * P.STANDARD_GRAVITY, -1.0 * P.STANDARD_GRAVITY, 0.25 * P.STANDARD_GRAVITY]
    assert values[3:6].tolist() == [0.5, 0.0, -3.0]
    rx = np.frombuffer(data_packet(0), dtype=np.uint8).copy()
    S.scan(np.concatenate([rx, np.zeros(P.MAX_PACKET, dtype=np.uint8)]), len(rx), sample, S.new_counters())
    assert sample[S.S_MERGED] == 1
    assert imu_values(sample, values, True, PERIOD, 8.0, 5.0, np.array(WORLD_FROM_NED)) == -1
    assert values[3:6].tolist() == [DTHETA[0][0] / PERIOD, DTHETA[0][1] / PERIOD, DTHETA[0][2] / PERIOD]


@pytest.mark.parametrize("older, status", [
    (dict(gyro=(float("nan"), 0.0, 0.0)), S.S_GYRO),
    (dict(accel=(0.0, float("inf"), 0.0)), S.S_ACCEL + 1),
    (dict(accel=(0.0, 0.0, -8.0)), SATURATED + S.S_ACCEL + 2),    # at the +-8 g range
    (dict(gyro=(0.0, 5.0, 0.0)), SATURATED + S.S_GYRO + 1),
])
def test_a_bad_value_in_an_older_packet_of_the_batch_is_found(older, status):
    for use_deltas in (False, True):
        sample, _ = read_once(data_packet(0) + data_packet(1, **older) + data_packet(2))
        assert imu_values(sample, np.zeros(10), use_deltas, PERIOD, 8.0, 5.0, np.array(WORLD_FROM_NED)) == status


@contextlib.contextmanager
def imu_on_a_pty(**options):
    """A MipImu reading a pty whose master end, yielded, plays an activated device (the configuration
    exchange is the emulator's tests' subject: here it is left out)."""
    master, slave = os.openpty()
    imu = MipImu(dxl_arm2(), MipImu.Options(name="imu", frame="link1", port=os.ttyname(slave), max_age=10.0,
                                            **options))
    imu.warm(None)
    imu._configure_device = lambda: None
    try:
        imu.configure()
        os.write(master, P.packet(P.BASE_CMD_SET, P.ack_nack(P.RESUME)))    # the ACK Resume waits for
        imu.activate()
        os.read(master, 4096)                                                # the Resume command itself
        yield imu, master
    finally:
        os.write(master, P.packet(P.BASE_CMD_SET, P.ack_nack(P.SET_TO_IDLE)))
        imu.deactivate()
        imu.close()
        os.close(master)
        os.close(slave)


def send(imu, master, data: bytes) -> None:
    """``data`` written by the device, and waited for until all of it can be read (a pty passes it on later)."""
    os.write(master, data)
    deadline = time.monotonic() + 5.0
    while imu.serial.in_waiting < len(data) and time.monotonic() < deadline:
        time.sleep(1e-3)
    assert imu.serial.in_waiting == len(data)


def test_the_driver_reads_a_burst_as_one_reading_and_counts_the_packets_merged():
    with imu_on_a_pty(use_deltas=True, rate=512.0) as (imu, master):
        imu.period = PERIOD     # the configuration left out: the message period it would have read
        send(imu, master, b"".join(data_packet(k) for k in range(3)))
        assert imu.read(0.0)
        assert imu.reading.angular_rate.tolist() == [1.5, -1.0, 0.5]
        assert imu.health.extra["merged_packets"] == 2 and imu.health.reads == 1
        assert imu.reading.device_stamp == 2300 * P.SECONDS_PER_WEEK + TOW[2]
        send(imu, master, data_packet(0))
        assert imu.read(0.001)
        assert imu.reading.angular_rate[0] == DTHETA[0][0] / PERIOD
        assert imu.health.extra["merged_packets"] == 2 and imu.health.reads == 2
        assert not imu.read(0.002) and not imu.health.fault


@pytest.mark.parametrize("older, reason", [
    (dict(gyro=(float("nan"), 0.0, 0.0)), "scaled gyro x is nan in a data packet"),
    (dict(accel=(0.0, 0.0, -8.0)), "scaled accel z saturated: -8 at the range +-8 g"),
])
def test_a_bad_value_in_an_older_packet_faults_in_one_line(older, reason):
    with imu_on_a_pty() as (imu, master):
        send(imu, master, data_packet(0) + data_packet(1, **older) + data_packet(2))
        assert not imu.read(0.0)
    assert imu.health.fault and imu.health.fault_reason.startswith("sensor 'imu': ")
    assert reason in imu.health.fault_reason and "\n" not in imu.health.fault_reason
