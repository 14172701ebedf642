"""The streaming side of MIP: whole packets out of the bytes read so far, compiled and allocation-free.

:func:`scan` walks a byte buffer the driver reads into, checks each packet's Fletcher-16 checksum (DCP 6.3-6.4),
decodes the IMU data set's fields (DCP 5.1; mip_sdk ``data_sensor.h``) into a sample vector, merges each data
packet into the batch the next reading is made of (:func:`merge_packet`) and moves an incomplete packet's bytes
to the front for the next read. A packet whose checksum fails is counted and the
search resumes one byte after its sync pair, so a corrupt length byte costs no packet: it holds the packets
behind it only until its claimed length (at most 261 bytes) has arrived, then they are parsed. Every step
advances, so no input can make it loop. Floats are decoded from their
bits (IEEE 754), so NaN and infinities arrive as the device sent them.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .protocol import (
    CHECKSUM_LENGTH,
    COMP_QUATERNION,
    DELTA_THETA,
    DELTA_VELOCITY,
    GPS_TIMESTAMP,
    HEADER_LENGTH,
    SCALED_ACCEL,
    SCALED_GYRO,
    SENSOR_DATA_SET,
    SHARED_REFERENCE_TIME,
    SYNC1,
    SYNC2,
)

BUFFER_BYTES = 8192   # what one read may hold: 85 packets of 96 bytes (every field the driver asks for)

# The sample vector: the newest data packet's fields as sent (g, rad/s, rad, g s, quaternion w x y z) ...
S_ACCEL, S_GYRO, S_DTHETA, S_DVEL, S_QUAT = 0, 3, 6, 9, 12
S_TOW, S_WEEK, S_TIME_FLAGS, S_REFERENCE_NS, S_PRESENT = 16, 17, 18, 19, 20
# ... then the batch, every data packet since the reading was last taken: the sums of the accel, gyro, delta
# theta and delta velocity fields (laid out as S_ACCEL to S_DVEL + 2), per accel and gyro axis the value of the
# largest magnitude, the packets merged, the bits of S_PRESENT every one of them had, the first non-finite
# value (its index in the sample, -1 for none) and whether the batch was taken (the next packet starts anew)
S_SUM, S_PEAK, S_MERGED, S_ALL_PRESENT, S_BAD, S_BAD_VALUE, S_TAKEN = 21, 33, 39, 40, 41, 42, 43
SAMPLE_SIZE = 44
# Bits of sample[S_PRESENT]: which fields the newest data packet held
P_ACCEL, P_GYRO, P_DTHETA, P_DVEL, P_QUAT, P_GPS_TIME, P_REFERENCE_TIME = 1, 2, 4, 8, 16, 32, 64

# Counters
C_PACKETS, C_SAMPLES, C_CORRUPT, C_CORRUPT_RUN, C_OTHER, C_SKIPPED, C_BAD_FIELDS, C_UNKNOWN_FIELDS = range(8)
COUNTERS = 8


def new_counters() -> np.ndarray:
    return np.zeros(COUNTERS, dtype=np.int64)


def new_sample() -> np.ndarray:
    s = np.full(SAMPLE_SIZE, np.nan)
    s[S_PRESENT] = 0.0
    s[S_MERGED] = 0.0
    s[S_TAKEN] = 1.0
    return s


@njit("float64(int64)", cache=True)
def float32_of_bits(bits):
    """The IEEE 754 single whose bits are ``bits`` (exact; NaN and infinities kept)."""
    sign = -1.0 if bits >> 31 else 1.0
    exponent = (bits >> 23) & 0xFF
    mantissa = bits & 0x7FFFFF
    if exponent == 0xFF:
        return np.nan if mantissa else sign * np.inf
    if exponent == 0:
        return sign * math.ldexp(float(mantissa), -149)
    return sign * math.ldexp(float(mantissa | 0x800000), exponent - 150)


@njit("float64(int64, int64)", cache=True)
def float64_of_bits(high, low):
    """The IEEE 754 double whose bits are ``high`` (upper 32) and ``low`` (lower 32)."""
    sign = -1.0 if high >> 31 else 1.0
    exponent = (high >> 20) & 0x7FF
    mantissa = ((high & 0xFFFFF) << 32) | low
    if exponent == 0x7FF:
        return np.nan if mantissa else sign * np.inf
    if exponent == 0:
        return sign * math.ldexp(float(mantissa), -1074)
    return sign * math.ldexp(float(mantissa | (1 << 52)), exponent - 1075)


@njit(cache=True, inline="always")
def _u32(buf, k):
    return (np.int64(buf[k]) << 24) | (np.int64(buf[k + 1]) << 16) | (np.int64(buf[k + 2]) << 8) | np.int64(buf[k + 3])


@njit(cache=True, inline="always")
def _floats(buf, k, n, sample, at):
    for i in range(n):
        sample[at + i] = float32_of_bits(_u32(buf, k + 4 * i))


@njit(cache=True)
def checksum_ok(buf, start, end):
    """Fletcher-16 of ``buf[start:end]`` equals the two bytes after it (DCP 6.4)."""
    a = 0
    b = 0
    for k in range(start, end):
        a = (a + buf[k]) & 0xFF
        b = (b + a) & 0xFF
    return buf[end] == a and buf[end + 1] == b


@njit(cache=True)
def decode_sensor_fields(buf, start, end, sample, counters):
    """The IMU data set's fields of the payload ``buf[start:end]`` into ``sample``; False when a field is
    malformed (a length below 2, past the payload, or not its descriptor's size)."""
    present = 0
    k = start
    while k < end:
        length = np.int64(buf[k])
        if length < 2 or k + length > end:
            return False
        desc = buf[k + 1]
        d = k + 2
        n = length - 2
        if desc == SCALED_ACCEL or desc == SCALED_GYRO or desc == DELTA_THETA or desc == DELTA_VELOCITY:
            if n != 12:
                return False
            at = S_ACCEL if desc == SCALED_ACCEL else S_GYRO if desc == SCALED_GYRO else \
                S_DTHETA if desc == DELTA_THETA else S_DVEL
            _floats(buf, d, 3, sample, at)
            present |= P_ACCEL if desc == SCALED_ACCEL else P_GYRO if desc == SCALED_GYRO else \
                P_DTHETA if desc == DELTA_THETA else P_DVEL
        elif desc == COMP_QUATERNION:
            if n != 16:
                return False
            _floats(buf, d, 4, sample, S_QUAT)
            present |= P_QUAT
        elif desc == GPS_TIMESTAMP:
            if n != 12:
                return False
            sample[S_TOW] = float64_of_bits(_u32(buf, d), _u32(buf, d + 4))
            sample[S_WEEK] = float((np.int64(buf[d + 8]) << 8) | buf[d + 9])
            sample[S_TIME_FLAGS] = float((np.int64(buf[d + 10]) << 8) | buf[d + 11])
            present |= P_GPS_TIME
        elif desc == SHARED_REFERENCE_TIME:
            if n != 8:
                return False
            sample[S_REFERENCE_NS] = float((_u32(buf, d) << 32) | _u32(buf, d + 4))
            present |= P_REFERENCE_TIME
        else:
            counters[C_UNKNOWN_FIELDS] += 1
        k += length
    sample[S_PRESENT] = float(present)
    return True


@njit(cache=True)
def merge_packet(sample):
    """The newest data packet (``sample[:S_PRESENT + 1]``) into the batch; a taken batch is emptied first.
    Every packet's values count: the sums carry them all, and a non-finite value or a peak of any packet stays
    in the batch until it is taken."""
    if sample[S_TAKEN] != 0.0:
        for k in range(12):
            sample[S_SUM + k] = 0.0
        for k in range(6):
            sample[S_PEAK + k] = 0.0
        sample[S_MERGED] = 0.0
        sample[S_ALL_PRESENT] = float(P_ACCEL | P_GYRO | P_DTHETA | P_DVEL | P_QUAT | P_GPS_TIME | P_REFERENCE_TIME)
        sample[S_BAD] = -1.0
        sample[S_BAD_VALUE] = 0.0
        sample[S_TAKEN] = 0.0
    present = np.int64(sample[S_PRESENT])
    sample[S_MERGED] += 1.0
    sample[S_ALL_PRESENT] = float(np.int64(sample[S_ALL_PRESENT]) & present)
    for at, bit, n in ((S_ACCEL, P_ACCEL, 3), (S_GYRO, P_GYRO, 3), (S_DTHETA, P_DTHETA, 3), (S_DVEL, P_DVEL, 3),
                       (S_QUAT, P_QUAT, 4)):
        if present & bit:
            for k in range(at, at + n):
                value = sample[k]
                if not np.isfinite(value) and sample[S_BAD] < 0.0:
                    sample[S_BAD], sample[S_BAD_VALUE] = float(k), value
                if k < S_QUAT:
                    sample[S_SUM + k] += value
                if k < S_DTHETA and abs(value) > abs(sample[S_PEAK + k]):
                    sample[S_PEAK + k] = value


@njit(cache=True)
def scan(buf, fill, sample, counters):
    """Every whole packet of ``buf[:fill]``: IMU data packets decoded into ``sample`` (the newest's fields),
    merged into its batch (:func:`merge_packet`) and counted in ``C_SAMPLES``; other well-formed packets in ``C_OTHER``; checksum failures in ``C_CORRUPT`` and
    ``C_CORRUPT_RUN`` (consecutive, reset by a good packet). The bytes of a trailing incomplete packet are moved
    to the front; returns how many remain."""
    k = 0
    while True:
        while k + 1 < fill and not (buf[k] == SYNC1 and buf[k + 1] == SYNC2):
            k += 1
            counters[C_SKIPPED] += 1
        if k + HEADER_LENGTH > fill:
            break
        end = k + HEADER_LENGTH + np.int64(buf[k + 3])
        if end + CHECKSUM_LENGTH > fill:
            break
        if not checksum_ok(buf, k, end):
            counters[C_CORRUPT] += 1
            counters[C_CORRUPT_RUN] += 1
            k += 1
            continue
        counters[C_PACKETS] += 1
        counters[C_CORRUPT_RUN] = 0
        if buf[k + 2] == SENSOR_DATA_SET:
            if decode_sensor_fields(buf, k + HEADER_LENGTH, end, sample, counters):
                merge_packet(sample)
                counters[C_SAMPLES] += 1
            else:
                counters[C_BAD_FIELDS] += 1
        else:
            counters[C_OTHER] += 1
        k = end + CHECKSUM_LENGTH
    if k >= fill - 1 and not (k == fill - 1 and buf[k] == SYNC1):
        counters[C_SKIPPED] += max(0, fill - k)
        return 0
    remaining = fill - k
    for i in range(remaining):
        buf[i] = buf[k + i]
    return remaining
