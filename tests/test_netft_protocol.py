"""The ATI Net F/T wire formats (rtctl.drivers.netft.protocol) and the netft backend's receive path.

Sections are those of ATI's *Net F/T Installation and Operation Manual*, document 9620-05-NET FT, rev. 11:

* sec. 10.1, Table 10.1: an RDT request is {uint16 0x1234, uint16 command, uint32 sample_count}, high byte
  first; the bytes of stop, start real-time, start buffered and set-bias requests, written out by hand here;
* sec. 10.1: an RDT record is {uint32 rdt_sequence, uint32 ft_sequence, uint32 status, int32 Fx .. Tz}, 36
  bytes; a hand-written record parses to its fields (negative counts included) and packs back to its bytes;
* sec. 10.1: rdt_sequence numbers the records of a request, so a gap is a lost record (counted), a repeated or
  older one is dropped; ft_sequence runs at 7000 per second and wraps at 2^32 (the device clock unwraps);
* sec. 11.5-11.6: the Read Calibration Info command (READCALINFO = 1 then 19 zero bytes) and its 24-byte
  response with the unit codes (2 = N, 3 = N m; 1 = lbf, 1 = lbf in convert to SI);
* the system status code: an error bit latches a fault with one line naming the bits; a latched monitor
  condition (bit 16) alone is not an error.
* A bounded fuzz (5000 random and mutated datagrams through the socket and through the parser) never raises,
  counts every datagram that is no whole number of records as corrupt, and leaves the counts finite.
"""
from __future__ import annotations

import socket

import numpy as np
import pytest

import rtctl
from rtctl.drivers.netft import NetFT
from rtctl.drivers.netft import protocol as P
from rtctl.model.urdf import load_urdf


def test_rdt_requests_are_the_bytes_of_the_manual():
    assert P.rdt_request(P.START_REALTIME) == bytes.fromhex("1234 0002 00000000")
    assert P.rdt_request(P.START_BUFFERED, 1000) == bytes.fromhex("1234 0003 000003e8")
    assert P.rdt_request(P.STOP) == bytes.fromhex("1234 0000 00000000")
    assert P.rdt_request(P.SET_SOFTWARE_BIAS) == bytes.fromhex("1234 0042 00000000")
    assert P.rdt_request(P.RESET_THRESHOLD_LATCH) == bytes.fromhex("1234 0041 00000000")
    assert P.parse_rdt_request(bytes.fromhex("1234 0002 0000000a")) == (P.START_REALTIME, 10)
    assert P.parse_rdt_request(bytes.fromhex("4321 0002 00000000")) is None      # not the header
    assert P.parse_rdt_request(bytes.fromhex("1234 0002 000000")) is None        # 7 bytes


RECORD_HEX = ("00000001" "0001e240" "80020000"                         # rdt 1, ft 123456, status
              "000f4240" "fff0bdc0" "00000000" "00000064" "ffffff9c" "7fffffff")   # 1e6, -1e6, 0, 100, -100, max
RECORD_FIELDS = (1, 123456, 0x80020000, (1_000_000, -1_000_000, 0, 100, -100, 2**31 - 1))


def test_an_rdt_record_parses_to_its_fields_and_packs_back():
    data = bytes.fromhex(RECORD_HEX)
    assert len(data) == P.RECORD_SIZE == 36
    state, counts = P.parser_state(), np.zeros(6)
    assert P.take_records(np.frombuffer(data, dtype=np.uint8).copy(), len(data), state, counts) == 1
    rdt, ft, status, values = RECORD_FIELDS
    assert (state[P.ST_LAST_RDT], state[P.ST_FT], state[P.ST_STATUS]) == (rdt, ft, status)
    assert counts.tolist() == list(values)
    assert P.pack_record(rdt, ft, status, values) == data


def take(state, counts, *records):
    data = b"".join(P.pack_record(*r) for r in records)
    return P.take_records(np.frombuffer(data, dtype=np.uint8).copy(), len(data), state, counts)


def test_sequence_gaps_are_counted_and_old_records_dropped():
    state, counts = P.parser_state(), np.zeros(6)
    z = (0,) * 6
    assert take(state, counts, (1, 10, 0, z), (2, 17, 0, z)) == 2
    assert take(state, counts, (5, 38, 0, (5,) * 6)) == 1
    assert state[P.ST_GAPS] == 2                                   # records 3 and 4 lost
    assert take(state, counts, (4, 31, 0, (4,) * 6), (5, 38, 0, z)) == 0
    assert state[P.ST_STALE] == 2 and counts[0] == 5               # the older and the repeated one dropped
    wrap = P.parser_state()
    assert take(wrap, counts, (0xFFFFFFFE, 40, 0, z), (0xFFFFFFFF, 41, 0, z), (1, 43, 0, z)) == 3
    assert wrap[P.ST_GAPS] == 1 and wrap[P.ST_STALE] == 0         # rolled over to 0, which was lost


def test_the_device_clock_unwraps_ft_sequence():
    state, counts = P.parser_state(), np.zeros(6)
    z = (0,) * 6
    take(state, counts, (1, 2**32 - 7000, 0, z))
    take(state, counts, (2, 3500, 0, z))                            # 1.5 s later, past the wrap
    assert P.device_seconds(state) == pytest.approx((2**32 + 3500) / 7000.0)


def test_the_calibration_exchange_is_the_bytes_of_the_manual():
    assert P.calibration_request() == bytes.fromhex("01" + "00" * 19)
    response = bytes.fromhex("1234" "02" "03" "000f4240" "000f4240" + "0001" * 6)
    cal = P.Calibration.parse(response)
    assert (cal.force_units, cal.torque_units, cal.counts_per_force, cal.counts_per_torque) == (2, 3, 10**6, 10**6)
    assert cal.pack() == response
    assert cal.counts_per_si() == (1e6, 1e6)
    imperial = P.Calibration(1, 1, 1_000_000, 1_000_000)           # counts per lbf and per lbf in
    assert imperial.counts_per_si() == pytest.approx((1e6 / 4.4482216152605, 1e6 / 0.1129848290276167))
    for bad, what in ((response[:23], "23 bytes"), (b"\x43\x21" + response[2:], "header"),
                      (response[:2] + b"\x09" + response[3:], "force unit code 9")):
        with pytest.raises(ValueError, match=what):
            P.Calibration.parse(bad)


def test_status_errors_and_their_names():
    assert P.status_errors(0) == 0
    assert P.status_errors(0x80010000) == 0            # a latched monitor condition: an event, not a fault
    assert P.status_errors(0x80020000) == 0x00020000
    assert P.status_errors(0x80000000) == 0x80000000   # the summary alone is an error of its own
    assert P.describe_status(0x80020004) == ("0x80020004 (transducer saturation or A/D error, "
                                             "internal temperature error)")


@pytest.fixture
def device_and_sensor():
    """A NetFT sensor on loopback whose 'device' is a socket of the test (counts given: no calibration read)."""
    device = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    device.bind(("127.0.0.1", 0))
    model = load_urdf(rtctl.bundled_model_path("arm7"))
    sensor = NetFT(model, NetFT.Options(name="wrist", frame="tool", host="127.0.0.1",
                                        rdt_port=device.getsockname()[1], counts_per_force=1e6,
                                        counts_per_torque=1e6, max_datagrams=10000))
    sensor.configure()
    sensor.activate()
    request, client = device.recvfrom(64)
    assert request == bytes.fromhex("1234 0002 00000000")        # activate starts real-time streaming
    yield device, client, sensor
    sensor.deactivate()
    assert device.recvfrom(64)[0] == bytes.fromhex("1234 0000 00000000")
    sensor.close()
    device.close()


def wait_readable(sock_like):
    import select
    select.select([sock_like.sock], [], [], 1.0)


def test_the_backend_converts_reorders_and_keeps_the_device_clock(device_and_sensor):
    device, client, sensor = device_and_sensor
    device.sendto(P.pack_record(1, 7000, 0, (1_000_000, -2_000_000, 3_000_000, 100_000, -200_000, 300_000)),
                  client)
    wait_readable(sensor)
    assert sensor.read(0.0)
    np.testing.assert_array_equal(sensor.reading.wrench, [0.1, -0.2, 0.3, 1.0, -2.0, 3.0])   # [torque; force]
    assert sensor.reading.device_stamp == 1.0
    device.sendto(P.pack_record(2, 7001, 0x80000004, (0,) * 6), client)
    wait_readable(sensor)
    assert not sensor.read(0.001)
    assert sensor.health.fault and sensor.health.fault_reason == (
        f"sensor 'wrist': Net F/T at 127.0.0.1:{device.getsockname()[1]} reports status 0x80000004 "
        "(internal temperature error)")


def test_fuzzed_datagrams_never_raise_and_are_counted(device_and_sensor):
    device, client, sensor = device_and_sensor
    rng = np.random.default_rng(7)
    valid = b"".join(P.pack_record(k, 7 * k, 0, rng.integers(-2**31, 2**31, 6)) for k in range(1, 5))
    sent_corrupt = 0
    for k in range(2500):
        if k % 2:
            data = bytearray(valid[:rng.integers(1, len(valid) + 1)])
            for _ in range(rng.integers(0, 4)):
                data[rng.integers(len(data))] ^= 1 << int(rng.integers(8))
            data = bytes(data) + bytes(rng.integers(0, 256, rng.integers(0, 3), dtype=np.uint8))
        else:
            data = bytes(rng.integers(0, 256, rng.integers(1, 1500), dtype=np.uint8))
        n = len(data)
        sent_corrupt += not (n % 36 == 0 and n <= 36 * P.MAX_RECORDS_PER_DATAGRAM)
        device.sendto(data, client)
        if k % 100 == 99:
            wait_readable(sensor)
            sensor.receive(sensor.reading, 0.0)            # never raises, whatever arrived
    while True:
        wait_readable(sensor)
        before = sensor.counters()
        sensor.receive(sensor.reading, 0.0)
        if sensor.counters() == before:
            break
    assert sensor.health.corrupt == sent_corrupt and sensor.counters()["corrupt_datagrams"] == sent_corrupt
    assert np.all(np.isfinite(sensor._counts))

    state, counts = P.parser_state(), np.zeros(6)
    buffer = np.zeros(36 * P.MAX_RECORDS_PER_DATAGRAM + 1, dtype=np.uint8)
    refused = 0
    for _ in range(2500):                                   # the parser alone, with lengths the socket cannot give
        n = int(rng.integers(-5, buffer.size + 5))
        buffer[:] = rng.integers(0, 256, buffer.size, dtype=np.uint8)
        refused += not (0 < n <= buffer.size - 1 and n % 36 == 0)
        P.take_records(buffer, n, state, counts)
    assert state[P.ST_CORRUPT] == refused and np.all(np.isfinite(counts))
