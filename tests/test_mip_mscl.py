"""MicroStrain's own library, MSCL (PyPI ``pymscl``, ``import mscl``), as the master of the emulated IMU over a pty.

MSCL pings the emulator, reads its device information, reads its descriptors and base rate, sets the IMU
message format, enables the stream, resumes it and parses the data packets, as it does with a device. The bytes
of that exchange are recorded (``rtctl-hil mip-imu --capture``) and kept as a fixture
(``tests/data/mip_mscl_capture.jsonl``: every command MSCL 68.4.5 sent, the emulator's replies and its first
data packets): our codec parses every byte MSCL sends, and the emulator answers the recorded commands with the
recorded replies, byte for byte.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from rtctl.drivers.mip import protocol as P
from rtctl.drivers.mip import stream as S
from rtctl.drivers.mip.driver import append_and_scan
from rtctl.hil.mip_device import Identity, MipDevice
from rtctl.hil.mip_imu import MipImuProcess

mscl = pytest.importorskip("mscl", reason="pymscl (the test extra) is not installed")

FIXTURE = Path(__file__).parent / "data" / "mip_mscl_capture.jsonl"
FIELDS = ("CH_FIELD_SENSOR_SCALED_ACCEL_VEC", "CH_FIELD_SENSOR_SCALED_GYRO_VEC", "CH_FIELD_SENSOR_DELTA_THETA_VEC",
          "CH_FIELD_SENSOR_DELTA_VELOCITY_VEC", "CH_FIELD_SENSOR_ORIENTATION_QUATERNION",
          "CH_FIELD_SENSOR_GPS_CORRELATION_TIMESTAMP")


def mscl_session(port: str, rate: int = 100, seconds: float = 0.6) -> dict:
    """What MSCL learns from the device on ``port`` and the data points of the packets it parses."""
    connection = mscl.Connection.Serial(port, 921600)
    try:
        node = mscl.InertialNode(connection)
        node.timeout(500)
        out = {"ping": node.ping(), "model_name": node.modelName(), "model_number": node.modelNumber(),
               "serial": node.serialNumber(), "options": node.deviceOptions()}
        version = node.firmwareVersion()
        out["firmware"] = (version.majorPart(), version.minorPart(), version.patchPart())
        node.setToIdle()
        imu = mscl.MipTypes.CLASS_AHRS_IMU
        out["fields"] = sorted(node.features().supportedChannelFields(imu))
        out["base_rate"] = node.getDataRateBase(imu)
        channels = mscl.MipChannels()
        for name in FIELDS:
            channels.append(mscl.MipChannel(getattr(mscl.MipTypes, name), mscl.SampleRate.Hertz(rate)))
        node.setActiveChannelFields(imu, channels)
        out["active"] = [(c.channelField(), c.rateDecimation(out["base_rate"]))
                         for c in node.getActiveChannelFields(imu)]
        node.enableDataStream(imu)
        node.resume()
        packets, end = [], time.monotonic() + seconds
        while time.monotonic() < end:
            for packet in node.getDataPackets(50):
                packets.append({p.channelName(): p.as_string() for p in packet.data()})
        node.setToIdle()
        out["packets"] = packets
        return out
    finally:
        connection.disconnect()


def record(path: Path, data_packets_kept: int = 3) -> dict:
    """Run :func:`mscl_session` against a new emulator capturing to ``path``; keep its first data packets only."""
    with MipImuProcess("--capture", str(path)) as emu:
        session = mscl_session(emu.port)
    lines, kept = [], 0
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        if entry["dir"] == "tx" and bytes.fromhex(entry["hex"])[2] == P.SENSOR_DATA_SET:
            kept += 1
            if kept > data_packets_kept:
                continue
        lines.append(line)
    path.write_text("\n".join(lines) + "\n")
    return session


def commands_of(entries) -> list[tuple[int, int]]:
    splitter = P.PacketSplitter()
    out = []
    for e in entries:
        if e["dir"] == "rx":
            out += [(s, d) for s, fields in splitter.feed(bytes.fromhex(e["hex"])) for d, _ in fields]
    assert splitter.corrupt == 0 and splitter.skipped == 0 and not splitter.buffer
    return out


@pytest.mark.slow
def test_mscl_configures_streams_and_parses_the_emulator(tmp_path):
    capture = tmp_path / "capture.jsonl"
    s = record(capture)
    assert s["ping"] and s["model_name"] == "3DM-GX5-25" and s["model_number"] == "6251-4220"
    assert s["serial"] == "6251.00000" and s["options"] == "8g,300dps" and s["firmware"] == (1, 1, 8)
    assert s["base_rate"] == 500
    ours = [P.SENSOR_DATA_SET << 8 | d for d in (P.SCALED_ACCEL, P.SCALED_GYRO, P.DELTA_THETA, P.DELTA_VELOCITY,
                                                  P.COMP_QUATERNION, P.GPS_TIMESTAMP)]
    assert s["fields"] == ours
    assert s["active"] == [(f, 5) for f in ours]          # 100 Hz from 500 Hz
    assert len(s["packets"]) >= 0.5 * 0.6 * 100
    last = s["packets"][-1]
    accel = np.array([float(last[f"scaledAccel{a}"]) for a in "XYZ"])
    assert abs(accel[2] + 1) < 0.02 and np.all(np.abs(accel[:2]) < 0.02)     # at rest, upright: -1 g on z
    assert last["orientQuaternion"].startswith("[1,")
    tows = [float(p["gpsCorrelTimestampTow"]) for p in s["packets"]]
    assert np.allclose(np.diff(tows), 0.01, atol=1e-9)     # the device's clock, 100 Hz
    recorded = [json.loads(line) for line in capture.read_text().splitlines()]
    fixture = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    assert commands_of(recorded) == commands_of(fixture), "MSCL now sends other commands than the fixture's"


def test_the_emulator_answers_mscls_recorded_commands_with_the_recorded_replies():
    """Replayed from the fixture, without MSCL: each command MSCL sent, parsed by our codec, gets from a new
    emulated device exactly the reply the emulator sent MSCL; the recorded data packets pass our stream parser
    with the fields MSCL asked for."""
    entries = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    assert commands_of(entries)[:3] == [(P.BASE_CMD_SET, P.PING), (P.BASE_CMD_SET, P.GET_DEVICE_INFO),
                                        (P.BASE_CMD_SET, P.SET_TO_IDLE)]
    device = MipDevice(Identity(), poll=lambda descriptors: b"")
    splitter = P.PacketSplitter()
    sent = [bytes.fromhex(e["hex"]) for e in entries if e["dir"] == "tx"]
    replies = [p for p in sent if p[2] != P.SENSOR_DATA_SET]
    data = [p for p in sent if p[2] == P.SENSOR_DATA_SET]
    answered = []
    for e in entries:
        if e["dir"] == "rx":
            for descriptor_set, fields in splitter.feed(bytes.fromhex(e["hex"])):
                answered += device.handle(descriptor_set, fields)
    assert answered == replies and device.nacks == 0
    buf = np.zeros(S.BUFFER_BYTES + P.MAX_PACKET, dtype=np.uint8)
    sample, counters = S.new_sample(), S.new_counters()
    rx = np.frombuffer(b"".join(data), dtype=np.uint8).copy()
    append_and_scan(buf, 0, rx, len(rx), sample, counters)
    assert counters[S.C_SAMPLES] == len(data) > 0 and counters[S.C_CORRUPT] == 0
    assert int(sample[S.S_PRESENT]) == (S.P_ACCEL | S.P_GYRO | S.P_DTHETA | S.P_DVEL | S.P_QUAT | S.P_GPS_TIME)
