"""The MIP codec (drivers/mip/protocol.py, stream.py) and the emulated device's command handling (hil/mip_device.py).

Exact wire bytes are the examples of the 3DM-GX5-35 / 3DM-GX5-45 DCP manuals (section numbers in each test);
the streaming parser is checked against ``struct`` on random values, fed whole and byte by byte, and fuzzed.
"""
from __future__ import annotations

import struct
import textwrap
import time

import numpy as np
import pytest

from allocation_counter import run_with_allocation_counters
from rtctl.drivers.mip import protocol as P
from rtctl.drivers.mip import stream as S
from rtctl.drivers.mip.driver import WORLD_FROM_NED, append_and_scan, imu_values
from rtctl.hil.mip_device import Identity, MipDevice

H = bytes.fromhex


def test_ping_and_its_ack_are_the_manuals_bytes():
    # DCP 2.2.1 / 4.1.1: "7565 0102 0201 E0C6"; DCP 2.2.2: the reply "7565 0104 04F1 0100 D56A"
    assert P.ping() == H("7565 0102 0201 E0C6")
    assert P.packet(P.BASE_CMD_SET, P.ack_nack(P.PING)) == H("7565 0104 04F1 0100 D56A")
    assert P.fletcher16(H("7565 0102 0201")) == 0xE0C6


def test_command_examples_of_the_manuals():
    assert P.get_device_info() == H("7565 0102 0203 E2C8")                    # DCP 4.1.3
    assert P.get_device_descriptors() == H("7565 0102 0204 E3C9")             # DCP 4.1.4
    assert P.resume() == H("7565 0102 0206 E5CB")                             # GX5-45 DCP 4.1.6
    assert P.packet(P.BASE_CMD_SET, P.field(P.SOFT_RESET)) == H("7565 0102 027E 5D43")   # GX5-45 DCP 4.1.9
    assert P.packet(P.CMD_3DM_SET, P.field(P.GET_IMU_BASE_RATE)) == H("7565 0C02 0206 F0F7")  # GX5-45 DCP 4.2.4
    # DCP 4.2.7: IMU stream ON (function 1, device 1, on) ends 0x04 0x1A
    assert P.datastream_control(P.WRITE, P.LEGACY_IMU_STREAM, True) == H("7565 0C05 0511 0101 01 041A")
    assert P.packet(P.CMD_3DM_SET, P.field(P.DEVICE_STARTUP_SETTINGS, b"\x03")) == H("7565 0C03 0330 031F 45")  # 4.2.12


def test_reply_examples_of_the_manuals():
    # GX5-45 DCP 4.2.4: ACK and the base rate 0x0064 (100 Hz), checksum D4 6B
    reply = P.packet(P.CMD_3DM_SET, P.ack_nack(P.GET_IMU_BASE_RATE), P.field(P.REPLY_IMU_BASE_RATE, H("0064")))
    assert reply == H("7565 0C08 04F1 0600 0483 0064 D46B")
    assert P.packet(P.CMD_3DM_SET, P.ack_nack(P.DEVICE_STARTUP_SETTINGS)) == H("7565 0C04 04F1 3000 0F0A")  # 4.2.12
    assert P.packet(P.BASE_CMD_SET, P.ack_nack(P.SOFT_RESET)) == H("7565 0104 04F1 7E00 5264")              # 4.1.9
    # GX5-45 DCP 4.1.6 prints the Resume ACK's echo as 0x01, but its checksum DA 74 is that of echo 0x06
    assert P.packet(P.BASE_CMD_SET, P.ack_nack(P.RESUME)) == H("7565 0104 04F1 0600 DA74")


def test_packets_and_device_information_round_trip():
    info = P.DeviceInfo(1108, "3DM-GX5-25", "6251-4220", "6251.12345", "", "8g,300dps")
    wire = P.packet(P.BASE_CMD_SET, P.ack_nack(P.GET_DEVICE_INFO), P.field(P.REPLY_DEVICE_INFO, info.encode()))
    assert wire[3] == 0x58 and wire[6:8] == H("0300")    # DCP 4.1.3: payload 0x58, ACK of 0x03
    descriptor_set, fields = P.parse_packet(wire)
    assert descriptor_set == P.BASE_CMD_SET and fields[0] == (P.ACK_NACK, H("0300"))
    assert P.DeviceInfo.decode(fields[1][1]) == info and info.firmware == "1.1.08"
    entries = [(P.SCALED_ACCEL, 2), (P.SCALED_GYRO, 2), (P.GPS_TIMESTAMP, 500)]
    _, [(desc, body)] = P.parse_packet(P.message_format(P.WRITE, P.SENSOR_DATA_SET, entries))
    assert desc == P.MESSAGE_FORMAT and body == H("01 80 03 040002 050002 1201F4")
    with pytest.raises(P.MipError, match="checksum"):
        P.parse_packet(P.ping()[:-1] + b"\x00")


def _data_packet(rng):
    accel, gyro, dth, dv = (rng.normal(0, 3, 3) for _ in range(4))
    quat = rng.normal(0, 1, 4)
    tow, week = rng.uniform(0, 604800), int(rng.integers(0, 3000))
    wire = P.packet(P.SENSOR_DATA_SET, P.field(P.SCALED_ACCEL, struct.pack(">3f", *accel)),
                    P.field(P.SCALED_GYRO, struct.pack(">3f", *gyro)), P.field(P.DELTA_THETA, struct.pack(">3f", *dth)),
                    P.field(P.DELTA_VELOCITY, struct.pack(">3f", *dv)),
                    P.field(P.COMP_QUATERNION, struct.pack(">4f", *quat)),
                    P.field(P.GPS_TIMESTAMP, struct.pack(">dHH", tow, week, 3)))
    expected = np.concatenate([np.array(x, dtype=np.float32).astype(float) for x in (accel, gyro, dth, dv, quat)])
    return wire, expected, tow, week


def _scan(data: bytes, chunks=None):
    buf = np.zeros(S.BUFFER_BYTES + P.MAX_PACKET, dtype=np.uint8)
    sample, counters = S.new_sample(), S.new_counters()
    fill = 0
    for chunk in chunks or [data]:
        rx = np.frombuffer(chunk, dtype=np.uint8).copy()
        fill = append_and_scan(buf, fill, rx, len(rx), sample, counters)
    return sample, counters, fill


def test_stream_parser_decodes_the_fields_as_struct_does_whole_and_byte_by_byte():
    rng = np.random.default_rng(1)
    wire, expected, tow, week = _data_packet(rng)
    stream = b"\x00\x75junk" + P.ping() + wire
    for chunks in (None, [stream[k:k + 1] for k in range(len(stream))]):
        sample, counters, fill = _scan(stream, chunks)
        assert np.array_equal(sample[:16], expected)
        assert sample[S.S_TOW] == tow and sample[S.S_WEEK] == week and sample[S.S_TIME_FLAGS] == 3
        assert counters[S.C_SAMPLES] == 1 and counters[S.C_OTHER] == 1 and counters[S.C_CORRUPT] == 0
        assert fill == 0


def test_floats_decoded_from_their_bits_exactly():
    rng = np.random.default_rng(2)
    bits = np.concatenate([rng.integers(0, 2 ** 32, 5000), [0, 1, 0x7F800000, 0xFF800000, 0x7FC00000, 0x807FFFFF]])
    for b in bits:
        want = struct.unpack(">f", int(b).to_bytes(4, "big"))[0]
        got = S.float32_of_bits(int(b))
        assert (np.isnan(want) and np.isnan(got)) or got == want
    for x in rng.normal(0, 1e5, 500):
        hi, lo = struct.unpack(">II", struct.pack(">d", x))
        assert S.float64_of_bits(hi, lo) == x


def test_reading_is_si_and_the_attitude_leaves_ned_for_the_z_up_world():
    """A device level and upright (accel z = -1 g, NED quaternion 1): specific force +9.80665 m/s^2 up the
    world's z, which is the device's -z; orientation a half turn about x (world x = north)."""
    wire = P.packet(P.SENSOR_DATA_SET, P.field(P.SCALED_ACCEL, struct.pack(">3f", 0, 0, -1)),
                    P.field(P.SCALED_GYRO, struct.pack(">3f", 0.5, 0, 0)),
                    P.field(P.COMP_QUATERNION, struct.pack(">4f", 1, 0, 0, 0)))
    sample, _, _ = _scan(wire)
    values = np.zeros(10)
    assert imu_values(sample, values, False, 0.002, 8.0, 5.0, np.array(WORLD_FROM_NED)) == -1
    assert np.allclose(values[:6], [0, 0, -9.80665, 0.5, 0, 0])
    assert np.allclose(values[6:], [1, 0, 0, 0])
    # a 90 deg yaw in NED (clockwise seen from above) is -90 deg about the world's z
    c = np.cos(np.pi / 4)
    sample[S.S_QUAT:S.S_QUAT + 4] = (c, 0, 0, c)
    imu_values(sample, values, False, 0.002, 8.0, 5.0, np.array(WORLD_FROM_NED))
    from rtctl.model import quaternion_to_matrix
    r_world = quaternion_to_matrix(values[6:])
    assert np.allclose(r_world @ [1, 0, 0], [0, -1, 0]) and np.allclose(r_world @ [0, 0, 1], [0, 0, -1])


def test_corrupt_packets_are_counted_and_the_stream_recovers():
    rng = np.random.default_rng(3)
    packets, bad = [], {3, 4, 5, 9}
    for k in range(12):
        wire = bytearray(_data_packet(rng)[0])
        if k in bad:
            wire[-1] ^= 0x5A
        packets.append(bytes(wire))
    _, counters, _ = _scan(b"".join(packets))
    assert counters[S.C_SAMPLES] == 12 - len(bad) and counters[S.C_CORRUPT] == len(bad)
    assert counters[S.C_CORRUPT_RUN] == 0     # the last packets were good
    _, counters, _ = _scan(b"".join(packets[:6]))
    assert counters[S.C_CORRUPT_RUN] == 3


def test_fuzzed_streams_never_raise_never_hang_and_count_what_they_drop():
    """Random bytes and valid packets with random bytes changed, inserted or cut: the parser returns for every
    input (bounded: each step advances), never finds more packets than were sent, and every valid packet not
    touched by a mutation is decoded once the bytes after it have arrived (a corrupt length byte holds the
    packets behind it until its claimed length is in; the zeros at the end stand for the stream going on)."""
    rng = np.random.default_rng(4)
    start = time.monotonic()
    for trial in range(300):
        parts, intact = [], 0
        for k in range(int(rng.integers(1, 12))):
            wire = bytearray(_data_packet(rng)[0] if rng.random() < 0.7 else P.ping())
            if rng.random() < 0.4:
                for _ in range(int(rng.integers(1, 4))):
                    op, at = rng.integers(0, 3), int(rng.integers(0, len(wire)))
                    if op == 0:
                        wire[at] = int(rng.integers(0, 256))
                    elif op == 1:
                        wire.insert(at, int(rng.integers(0, 256)))
                    else:
                        del wire[at:]
                        break
            elif wire[2] == P.SENSOR_DATA_SET:
                intact += 1
            parts.append(bytes(wire))
            if rng.random() < 0.3:
                parts.append(rng.integers(0, 256, int(rng.integers(1, 40)), dtype=np.uint8).tobytes())
        data = b"".join(parts) + bytes(P.MAX_PACKET)
        cuts = sorted(rng.integers(0, len(data) + 1, 3))
        chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]
        sample, counters, fill = _scan(data, chunks)
        assert 0 <= fill < P.MAX_PACKET
        assert counters[S.C_PACKETS] <= len(parts) + 2
        assert counters[S.C_SAMPLES] >= intact
    assert time.monotonic() - start < 30


def _device():
    return MipDevice(Identity(), poll=lambda descriptors: P.packet(P.SENSOR_DATA_SET))


def test_the_emulated_device_acks_and_nacks_with_mip_sdk_codes():
    dev = _device()
    reply = dev.handle(*P.parse_packet(P.ping()))
    assert reply == [H("7565 0104 04F1 0100 D56A")]
    unknown = P.packet(P.BASE_CMD_SET, P.field(0x55))
    assert P.parse_packet(dev.handle(*P.parse_packet(unknown))[0])[1] == [(P.ACK_NACK, bytes((0x55, 0x01)))]
    bad_rate = P.packet(P.CMD_3DM_SET, P.field(P.GET_BASE_RATE, b"\x82"))          # a data set it has not
    assert P.parse_packet(dev.handle(*P.parse_packet(bad_rate))[0])[1] == [(P.ACK_NACK, H("0E03"))]
    bad_format = P.message_format(P.WRITE, P.SENSOR_DATA_SET, [(0x42, 1)])           # a field it has not
    assert P.parse_packet(dev.handle(*P.parse_packet(bad_format))[0])[1] == [(P.ACK_NACK, H("0F03"))]
    assert dev.nacks == 3 and not dev.settings.imu_format


def test_the_emulated_device_streams_only_when_formatted_enabled_and_resumed():
    dev = _device()
    assert not dev.streaming
    dev.handle(*P.parse_packet(P.message_format(P.WRITE, P.SENSOR_DATA_SET, [(P.SCALED_GYRO, 5)])))
    assert dev.streaming
    dev.handle(*P.parse_packet(P.set_to_idle()))
    assert not dev.streaming
    dev.handle(*P.parse_packet(P.datastream_control(P.WRITE, P.SENSOR_DATA_SET, False)))
    dev.handle(*P.parse_packet(P.resume()))
    assert not dev.streaming
    read = dev.handle(*P.parse_packet(P.datastream_control(P.READ, P.SENSOR_DATA_SET)))
    assert P.parse_packet(read[0])[1] == [(P.ACK_NACK, H("1100")), (P.REPLY_DATASTREAM_ENABLE, H("8000"))]
    dev.handle(*P.parse_packet(P.datastream_control(P.WRITE, P.LEGACY_IMU_STREAM, True)))
    assert dev.streaming
    fmt = dev.handle(*P.parse_packet(P.message_format(P.READ)))
    assert P.parse_packet(fmt[0])[1][1] == (P.REPLY_MESSAGE_FORMAT, H("80 01 050005"))
    polled = dev.handle(*P.parse_packet(P.poll_data(P.SENSOR_DATA_SET, [P.SCALED_GYRO], suppress_ack=True)))
    assert polled == [P.packet(P.SENSOR_DATA_SET)]     # no ACK/NACK packet, only the data


PARSE_SCRIPT = textwrap.dedent("""
    import struct
    import numpy as np
    from numba import njit
    from rtctl.drivers.mip import protocol as P, stream as S
    from rtctl.drivers.mip.driver import WORLD_FROM_NED, append_and_scan, imu_values

    @njit
    def cycles(n, buf, rx, sample, counters, values, q):
        bad = 0
        fill = 0
        for _ in range(n):
            fill = append_and_scan(buf, fill, rx, rx.shape[0], sample, counters)   # three merged each read
            bad += imu_values(sample, values, False, 0.002, 8.0, 5.0, q) + 1
            bad += imu_values(sample, values, True, 0.002, 8.0, 5.0, q) + 1
        return bad

    fields = [P.field(d, struct.pack(">3f", 0.1, -0.2, -1.0)) for d in (4, 5, 7, 8)]
    wire = P.packet(P.SENSOR_DATA_SET, *fields, P.field(P.COMP_QUATERNION, struct.pack(">4f", 1, 0, 0, 0)),
                    P.field(P.GPS_TIMESTAMP, struct.pack(">dHH", 1.0, 2, 0)))
    rx = np.frombuffer(wire * 3 + wire[:50], dtype=np.uint8).copy()   # a packet split across reads too
    args = (np.zeros(S.BUFFER_BYTES + P.MAX_PACKET, dtype=np.uint8), rx, S.new_sample(), S.new_counters(),
            np.zeros(10), np.array(WORLD_FROM_NED))
    assert cycles(1, *args) == 0
    counts = allocations(cycles, *args)
    print("allocations for 1 and 300 reads:", counts)
    assert counts[0] == counts[1], counts
    print("OK")
""")


@pytest.mark.slow
def test_parsing_and_converting_a_read_allocates_nothing():
    out = run_with_allocation_counters(PARSE_SCRIPT)
    assert out.strip().endswith("OK"), out
