"""Dynamixel Protocol 2.0 codec, control table, emulated firmware (in process) and config wiring.

Known vectors are the example packets of the ROBOTIS e-manual (Protocol 2.0 page); byte
identity with the official ``dynamixel_sdk`` is checked by letting its PacketHandler write
into a fake port that captures the bytes.
"""
import dynamixel_sdk as sdk
import numpy as np
import pytest
from rtctl.drivers import create_driver
from rtctl.drivers.dynamixel import MODELS, DynamixelDriver, ServoModel
from rtctl.drivers.dynamixel import protocol as P
from rtctl.hil.dynamixel_emulator import ServoChain, hil_arm

# (our packet, e-manual bytes)
EMANUAL = [
    (lambda: P.ping_packet(1), "FF FF FD 00 01 03 00 01 19 4E"),
    (lambda: P.encode_status(1, 0, bytes([0x06, 0x04, 0x26])), "FF FF FD 00 01 07 00 55 00 06 04 26 65 5D"),
    (lambda: P.read_packet(1, 132, 4), "FF FF FD 00 01 07 00 02 84 00 04 00 1D 15"),
    (lambda: P.encode_status(1, 0, P.u32(166)), "FF FF FD 00 01 08 00 55 00 A6 00 00 00 8C C0"),
    (lambda: P.write_packet(1, 116, P.u32(512)), "FF FF FD 00 01 09 00 03 74 00 00 02 00 00 CA 89"),
    (lambda: P.sync_read_packet(132, 4, [1, 2]), "FF FF FD 00 FE 09 00 82 84 00 04 00 01 02 CE FA"),
    (lambda: P.sync_write_packet(116, 4, [(1, P.u32(150)), (2, P.u32(170))]),
     "FF FF FD 00 FE 11 00 83 74 00 04 00 01 96 00 00 00 02 AA 00 00 00 82 87"),
]


@pytest.mark.parametrize("build,expected", EMANUAL)
def test_packets_match_the_emanual_examples(build, expected):
    assert build() == bytes.fromhex(expected)


def test_crc16_is_poly_8005_init_0():
    assert P.crc16(b"123456789") == 0xFEE8        # CRC-16/BUYPASS check value
    assert P.crc16(bytes.fromhex("FFFFFD0001030001")) == 0x4E19


def test_byte_stuffing_inserts_and_removes_fd():
    data = bytes([0xFF, 0xFF, 0xFD, 0x00])          # goal position 0x00FDFFFF would look like a header
    pkt = P.write_packet(1, 116, data)
    assert pkt[7:].startswith(bytes([P.WRITE, 0x74, 0x00, 0xFF, 0xFF, 0xFD, 0xFD, 0x00]))
    assert pkt[5] | pkt[6] << 8 == 3 + 2 + 4 + 1    # LEN counts the stuffed byte
    assert P.decode(pkt) == P.Packet(1, P.WRITE, 0, bytes([0x74, 0x00]) + data)
    status = P.encode_status(3, 0, bytes([0xFF, 0xFF, 0xFD, 0x01]))
    assert b"\xff\xff\xfd\xfd\x01" in status
    assert P.decode(status).params == bytes([0xFF, 0xFF, 0xFD, 0x01])


def test_status_error_byte():
    pkt = P.decode(P.encode_status(7, P.ERROR_ALERT | P.ERROR_ACCESS))
    assert (pkt.id, pkt.instruction, pkt.error, pkt.params) == (7, P.STATUS, 0x87, b"")
    assert P.describe_error(pkt.error) == "access error + hardware alert"
    assert P.describe_error(P.ERROR_CRC) == "CRC error"


def test_stream_decoder_skips_junk_counts_corrupt_and_handles_split_input():
    good1, good2 = P.encode_status(1, 0, b"\x01\x02"), P.encode_status(2, 0, b"\x03")
    bad = bytearray(P.encode_status(3, 0, b"\x04"))
    bad[-1] ^= 0xFF
    stream = b"\x00\x13\xff" + good1 + bytes(bad) + good2
    dec = P.StreamDecoder()
    out = []
    for b in stream:                                 # byte by byte
        dec.feed(bytes([b]))
        while (pkt := dec.pop()) is not None:
            out.append(pkt)
    assert [p.id for p in out] == [1, 2]
    assert out[0].params == b"\x01\x02" and out[1].params == b"\x03"
    assert dec.corrupt == 1
    assert dec.junk == 3 + len(bad)


class CapturePort:
    """The slice of dynamixel_sdk's PortHandler its PacketHandler uses; records written bytes, never replies."""

    def __init__(self):
        self.is_using = False
        self.written = []

    def clearPort(self):
        pass

    def writePort(self, packet):
        self.written.append(bytes(packet))
        return len(packet)

    def readPort(self, length):
        return []

    def setPacketTimeout(self, packet_length):
        pass

    def setPacketTimeoutMillis(self, msec):
        pass

    def isPacketTimeout(self):
        return True


def sdk_bytes(call):
    port = CapturePort()
    call(sdk.PacketHandler(2.0), port)
    assert len(port.written) == 1
    return port.written[0]


STUFFED = [0xFF, 0xFF, 0xFD, 0x00]


@pytest.mark.parametrize("name,theirs,ours", [
    ("ping", lambda ph, p: ph.ping(p, 1), lambda: P.ping_packet(1)),
    ("read", lambda ph, p: ph.readTx(p, 3, 132, 4), lambda: P.read_packet(3, 132, 4)),
    ("write", lambda ph, p: ph.writeTxOnly(p, 2, 102, 2, [0x38, 0xFF]), lambda: P.write_packet(2, 102, P.u16(-200))),
    ("write stuffed", lambda ph, p: ph.writeTxOnly(p, 1, 116, 4, list(STUFFED)),
     lambda: P.write_packet(1, 116, bytes(STUFFED))),
    ("sync read", lambda ph, p: ph.syncReadTx(p, 126, 10, [1, 2, 3], 3, False),
     lambda: P.sync_read_packet(126, 10, [1, 2, 3])),
    ("sync write", lambda ph, p: ph.syncWriteTxOnly(p, 102, 2, [1, 0x10, 0x00, 2, 0xF0, 0xFF], 6),
     lambda: P.sync_write_packet(102, 2, [(1, P.u16(16)), (2, P.u16(-16))])),
    ("sync write stuffed", lambda ph, p: ph.syncWriteTxOnly(p, 116, 4, [1] + STUFFED + [2] + STUFFED, 10),
     lambda: P.sync_write_packet(116, 4, [(1, bytes(STUFFED)), (2, bytes(STUFFED))])),
    ("bulk read", lambda ph, p: ph.bulkReadTx(p, [1, 132, 0, 4, 0, 2, 126, 0, 2, 0], 10, False),
     lambda: P.bulk_read_packet([(1, 132, 4), (2, 126, 2)])),
    ("bulk write", lambda ph, p: ph.bulkWriteTxOnly(p, [1, 64, 0, 1, 0, 1, 2, 102, 0, 2, 0, 5, 0], 13),
     lambda: P.bulk_write_packet([(1, 64, b"\x01"), (2, 102, P.u16(5))])),
])
def test_packets_are_byte_identical_to_dynamixel_sdk(name, theirs, ours):
    wire = sdk_bytes(theirs)
    if "stuffed" not in name:
        assert ours() == wire, name
        return
    # dynamixel-sdk 4.1.0's txPacket discards what addStuffing returns when stuffing lengthens the
    # packet, so its wire bytes stay unstuffed. The SDK's own stuffer and CRC are the oracle here.
    ph = sdk.PacketHandler(2.0)
    stuffed = ph.addStuffing(list(wire))
    crc = ph.updateCRC(0, stuffed, len(stuffed) - 2)
    stuffed[-2:] = [crc & 0xFF, crc >> 8]
    assert ours() == bytes(stuffed), name
    assert len(ours()) == len(wire) + wire.count(b"\xff\xff\xfd") - 1     # one FD per run, not the header
    # Our decoder (the emulated firmware) still accepts the SDK's unstuffed packet.
    assert P.decode(wire).params[-4:] == bytes(STUFFED)


def test_sync_write_buffer_of_the_driver_matches_the_sdk():
    """The in-place per-cycle SYNC_WRITE (goal currents) against the SDK's GroupSyncWrite."""
    model = hil_arm(2)
    drv = DynamixelDriver(model, DynamixelDriver.Options(port="/dev/null", servo_ids=[4, 9]))
    from rtctl.rt.interfaces import Command
    cmd = Command(model)
    cmd.effort[:] = [0.5, -0.25]
    sent = []
    drv._send = lambda data: sent.append(bytes(data)) or True
    drv.write(cmd, 0.0)
    units = [int(round(e / (4.1 / 2.3) / 2.69e-3)) for e in (0.5, -0.25)]
    port = CapturePort()
    group = sdk.GroupSyncWrite(port, sdk.PacketHandler(2.0), 102, 2)
    for dxl_id, u in zip([4, 9], units):
        group.addParam(dxl_id, list(P.u16(u)))
    group.txPacket()
    assert sent[0] == port.written[0]
    assert units == [104, -52]


def test_control_table_is_the_xm430_w350_layout():
    m = ServoModel("XM430-W350")
    expect = {"operating_mode": (11, 1), "torque_enable": (64, 1), "goal_current": (102, 2),
              "goal_position": (116, 4), "present_current": (126, 2), "present_velocity": (128, 4),
              "present_position": (132, 4)}
    assert {k: (m[k].address, m[k].size) for k in expect} == expect
    assert m.model_number == 1020 and m.current_limit == 1193
    assert m.rad_per_count == pytest.approx(2 * np.pi / 4096)
    assert m.rad_s_per_unit == pytest.approx(0.229 * 2 * np.pi / 60)
    assert m.amp_per_unit == 2.69e-3
    assert m.span("present_current", "present_position") == (126, 10)
    assert set(MODELS) >= {"XM430-W350", "XM540-W270"}


def chain_reply(chain, packet):
    chain.handle(P.decode(packet), 0.0)
    out = [P.decode(d) for d in chain.due(1.0)]
    return out


def test_emulated_firmware_answers_and_enforces_access_rules():
    chain = ServoChain(hil_arm(2), initial=[0.5, -0.25])
    (pong,) = chain_reply(chain, P.ping_packet(2))
    assert pong.params == P.u16(1020) + bytes([48])
    (pos,) = chain_reply(chain, P.read_packet(1, 132, 4))
    assert P.from_bytes(pos.params) == round(0.5 / (2 * np.pi / 4096)) + 2048
    (ok,) = chain_reply(chain, P.write_packet(1, 11, b"\x00"))          # operating mode, torque off
    assert ok.error == 0
    chain_reply(chain, P.write_packet(1, 64, b"\x01"))
    (denied,) = chain_reply(chain, P.write_packet(1, 11, b"\x03"))      # EEPROM with torque on
    assert denied.error == P.ERROR_ACCESS
    (ro,) = chain_reply(chain, P.write_packet(2, 132, P.u32(0)))        # present position is read-only
    assert ro.error == P.ERROR_ACCESS
    (bad,) = chain_reply(chain, P.encode(1, 0x7F))
    assert bad.error == P.ERROR_INSTRUCTION
    replies = chain_reply(chain, P.sync_read_packet(126, 10, [2, 1]))
    assert [r.id for r in replies] == [2, 1] and all(len(r.params) == 10 for r in replies)


def test_emulated_current_mode_applies_kt_times_quantised_current():
    """XM430-W350 e-manual, Goal Current (102): range -Current Limit ~ Current Limit; a goal beyond it is
    refused (Protocol 2.0, Data Limit Error) and the torque stays Kt x the accepted current."""
    chain = ServoChain(hil_arm(2))
    for dxl_id in (1, 2):
        chain_reply(chain, P.write_packet(dxl_id, 11, b"\x00"))
    chain_reply(chain, P.sync_write_packet(102, 2, [(1, P.u16(100)), (2, P.u16(-1193))]))
    chain_reply(chain, P.sync_write_packet(64, 1, [(1, b"\x01"), (2, b"\x01")]))
    (refused,) = chain_reply(chain, P.write_packet(2, 102, P.u16(-2000)))
    assert refused.error == P.ERROR_DATA_LIMIT and chain.stats["refused_writes"] == 1
    chain._torques()
    kt = 4.1 / 2.3
    assert chain.effort[0] == pytest.approx(100 * 2.69e-3 * kt)
    assert chain.effort[1] == pytest.approx(-1193 * 2.69e-3 * kt)


def test_fast_sync_read_status_packet_is_the_emanual_example_byte_for_byte():
    """Protocol 2.0, Fast Sync Read (0x8A) example: IDs 3, 7, 4 with Present Position 166, 2079, 1023 answer one
    packet from 0xFE, each part ending in the CRC of the packet so far."""
    chain = ServoChain(hil_arm(3), ids=[3, 7, 4])
    for servo, position in zip(chain.servos, (166, 2079, 1023)):
        servo.set("present_position", position)
    request = bytes.fromhex("FF FF FD 00 FE 0A 00 8A 84 00 04 00 03 07 04 20 F2")
    assert P.encode(P.BROADCAST_ID, P.FAST_SYNC_READ, P.u16(132) + P.u16(4) + bytes([3, 7, 4])) == request
    chain.handle(P.decode(request), 0.0)
    assert chain.due(1.0) == [bytes.fromhex("FF FF FD 00 FE 19 00 55 00 03 A6 00 00 00 84 08 00 07 1F 08 00 00 16 CA"
                                            " 00 04 FF 03 00 00 D1 9E")]


def test_status_packets_to_one_sync_read_leave_in_the_order_of_its_ids():
    """Protocol 2.0, Sync Read (0x82): status packets are returned in the order of the IDs in the instruction,
    whatever each servo's Return Delay Time (9)."""
    chain = ServoChain(hil_arm(2))
    chain.servos[0].set("return_delay_time", 250)         # 500 us
    chain.servos[1].set("return_delay_time", 0)
    chain.handle(P.decode(P.sync_read_packet(132, 4, [1, 2])), 0.0)
    assert [t for t, _ in chain.pending] == [500e-6, 500e-6]
    assert [P.decode(d).id for d in chain.due(1.0)] == [1, 2]


def test_driver_bus_watchdog_is_si_converted_and_on_by_default():
    """XM430-W350 e-manual, Bus Watchdog (98): 20 ms units, 1~127, 0 off. The driver takes seconds, rounds up."""
    model = hil_arm(2)
    assert create_driver("dynamixel", model, port="/dev/ttyUSB0").watchdog_units == 25          # 0.5 s
    assert create_driver("dynamixel", model, port="/dev/ttyUSB0", bus_watchdog=0.05).watchdog_units == 3
    assert create_driver("dynamixel", model, port="/dev/ttyUSB0", bus_watchdog=0.0).watchdog_units == 0
    assert create_driver("dynamixel", model, port="/dev/ttyUSB0", bus_watchdog=2.54).watchdog_units == 127
    for bad in (0.01, 2.6, float("nan")):
        with pytest.raises(ValueError, match="bus_watchdog"):
            create_driver("dynamixel", model, port="/dev/ttyUSB0", bus_watchdog=bad)


def test_driver_clamps_goal_positions_to_the_position_limits():
    """XM430-W350 e-manual, Goal Position (116): Min~Max Position Limit in position control; a SYNC WRITE has no
    status packet, so the driver clamps (counting the saturated cycle) instead of sending a refused goal."""
    model = hil_arm(2)
    from rtctl.rt.interfaces import Command
    drv = DynamixelDriver(model, DynamixelDriver.Options(port="/dev/null", mode="position"))
    drv._pos_min[:], drv._pos_max[:] = 1000, 3000
    cmd = Command(model)
    cmd.position[:] = [3.0, -0.1]                            # 3.0 rad = 4004 counts > 3000
    cmd.stiffness[:] = 1.0
    sent = []
    drv._send = lambda data: sent.append(bytes(data)) or True
    drv.write(cmd, 0.0)
    pkt = P.decode(sent[0])
    assert pkt.params == P.u16(116) + P.u16(4) + bytes([1]) + P.u32(3000) + bytes([2]) + P.u32(1983)
    assert drv.saturated_cycles == 1


def test_hardware_error_status_bits_are_named():
    """XM430-W350 e-manual, Shutdown (63) / Hardware Error Status (70) bits 0, 2, 3, 4, 5."""
    assert P.describe_hardware_error(0x24) == "overheating error + overload error"
    assert P.describe_hardware_error(0x01) == "input voltage error"
    assert P.describe_hardware_error(0x42) == "unknown bits 0x42"


def test_driver_is_registered_and_validates_its_options():
    model = hil_arm(2)
    drv = create_driver("dynamixel", model, port="/dev/ttyUSB0")
    assert isinstance(drv, DynamixelDriver) and drv.servo_ids == [1, 2]
    with pytest.raises(ValueError, match="servo_ids"):
        create_driver("dynamixel", model, port="/dev/ttyUSB0", servo_ids=[1, 1])
    with pytest.raises(ValueError, match="unknown Dynamixel model"):
        create_driver("dynamixel", model, port="/dev/ttyUSB0", servo_model="XL999")
    with pytest.raises(ValueError, match="read_timeout"):
        create_driver("dynamixel", model, port="/dev/ttyUSB0", read_timeout=0.0)
    with pytest.raises(ValueError, match="bus_watchdog"):
        create_driver("dynamixel", model, port="/dev/ttyUSB0", bus_watchdog=-0.1)


def test_config_selects_the_dynamixel_backend(tmp_path):
    from rtctl.config import ConfigError, build, load_config
    path = tmp_path / "dxl.toml"
    path.write_text('[robot]\nmodel = "arm7"\n[driver]\nbackend = "dynamixel"\nport = "/dev/ttyUSB0"\n'
                    'baudrate = 4000000\nservo_ids = [11, 12, 13, 14, 15, 16, 17]\nread_timeout = 0.002\n'
                    'bus_watchdog = 0.2\n'
                    '[trajectory]\ngoal = [0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]\nduration = 1.0\n')
    loop = build(load_config(path))
    drv = loop.driver
    assert isinstance(drv, DynamixelDriver)
    assert (drv.port, drv.baudrate, drv.servo_ids, drv.read_timeout) == ("/dev/ttyUSB0", 4000000, list(range(11, 18)),
                                                                    0.002)
    assert (drv.bus_watchdog, drv.watchdog_units) == (pytest.approx(0.2), 10)
    path.write_text('[driver]\nbackend = "dynamixel"\n[trajectory]\ngoal = [0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]\n'
                    'duration = 1.0\n')
    with pytest.raises(ConfigError, match=r"\[driver\] port is required for driver 'dynamixel'"):
        build(load_config(path))
