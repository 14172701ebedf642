"""The MIP packet codec of MicroStrain's inertial sensors (3DM-GX5, 3DM-CV7 and their families).

References: the 3DM-GX5-35 and 3DM-GX5-45 Data Communications Protocol (DCP) manuals (LORD Sensing; the
GX5-45's is document 8500-0064 rev. C, 2016) -- section 2.1 (MIP packet overview), 2.2 (command overview:
the ping and its reply, the ACK/NACK field), 4.1 (base commands), 4.2 (3DM commands), 5.1 (IMU data), 6.1-6.4
(the MIP packet reference: structure, payload length, checksum range, the 16-bit Fletcher checksum); the
3DM-CV7 online DCP for the generic message format (0x0C,0x0F), base rate (0x0C,0x0E), datastream control
(0x0C,0x11 with a descriptor set) and the shared data fields (0xD0-0xFF in every data set). Names follow
MicroStrain's own MIP SDK (``mip_sdk``: ``MIP_CMD_DESC_BASE_PING``, ``MIP_NACK_INVALID_PARAM``, ...).

A packet is ``0x75 0x65`` (``"ue"``), the descriptor set, the payload length, the payload -- one or more
fields, each ``[length, descriptor, data...]`` whose length byte counts itself and the descriptor -- and
the Fletcher-16 checksum over everything before it, MSB first. Multi-byte values are big-endian, floats
IEEE-754 single (``f``) or double (``d``).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

SYNC1, SYNC2 = 0x75, 0x65
HEADER_LENGTH = 4
CHECKSUM_LENGTH = 2
MAX_PAYLOAD = 255
MAX_PACKET = HEADER_LENGTH + MAX_PAYLOAD + CHECKSUM_LENGTH

# Descriptor sets (mip_sdk: MIP_BASE_CMD_DESC_SET, MIP_3DM_CMD_DESC_SET, MIP_SENSOR_DATA_DESC_SET)
BASE_CMD_SET = 0x01
CMD_3DM_SET = 0x0C
SENSOR_DATA_SET = 0x80

# Base commands (DCP 4.1) and their reply fields
PING = 0x01
SET_TO_IDLE = 0x02
GET_DEVICE_INFO = 0x03
GET_DEVICE_DESCRIPTORS = 0x04
BUILT_IN_TEST = 0x05
RESUME = 0x06
GET_EXTENDED_DESCRIPTORS = 0x07
SOFT_RESET = 0x7E
REPLY_DEVICE_INFO = 0x81
REPLY_DEVICE_DESCRIPTORS = 0x82
REPLY_EXTENDED_DESCRIPTORS = 0x86

# 3DM commands (DCP 4.2) and their reply fields
POLL_IMU_MESSAGE = 0x01
GET_IMU_BASE_RATE = 0x06
IMU_MESSAGE_FORMAT = 0x08
POLL_DATA = 0x0D
GET_BASE_RATE = 0x0E
MESSAGE_FORMAT = 0x0F
CONTROL_DATA_STREAM = 0x11
DEVICE_STARTUP_SETTINGS = 0x30
REPLY_IMU_MESSAGE_FORMAT = 0x80
REPLY_IMU_BASE_RATE = 0x83
REPLY_DATASTREAM_ENABLE = 0x85
REPLY_BASE_RATE = 0x8E
REPLY_MESSAGE_FORMAT = 0x8F

# Function selectors of the settings commands (DCP 4.2.5)
WRITE, READ, SAVE, LOAD, DEFAULT = 1, 2, 3, 4, 5
# Datastream control's legacy stream selectors (Generation 5: 0x01 is the IMU stream); 0 is every stream
ALL_STREAMS, LEGACY_IMU_STREAM = 0x00, 0x01

# The ACK/NACK field: the same descriptor in every command set (DCP 2.2.2); error codes as mip_sdk's
# mip_cmd_result
ACK_NACK = 0xF1
ACK_OK = 0x00
NACK_COMMAND_UNKNOWN = 0x01
NACK_INVALID_CHECKSUM = 0x02
NACK_INVALID_PARAM = 0x03
NACK_COMMAND_FAILED = 0x04
NACK_COMMAND_TIMEOUT = 0x05
NACK_NAMES = {ACK_OK: "ACK", NACK_COMMAND_UNKNOWN: "command unknown", NACK_INVALID_CHECKSUM: "invalid checksum",
              NACK_INVALID_PARAM: "invalid parameter", NACK_COMMAND_FAILED: "command failed",
              NACK_COMMAND_TIMEOUT: "command timeout"}

# IMU (sensor) data fields (DCP 5.1; mip_sdk data_sensor.h), and the shared reference timestamp
SCALED_ACCEL = 0x04           # 3 f: g, sensor frame
SCALED_GYRO = 0x05            # 3 f: rad/s
DELTA_THETA = 0x07            # 3 f: rad over the message period
DELTA_VELOCITY = 0x08         # 3 f: g s over the message period
COMP_QUATERNION = 0x0A        # 4 f: (w, x, y, z), the sensor in the NED frame: p_veh = q^-1 p_ned q
GPS_TIMESTAMP = 0x12          # d time of week (s), H week, H valid flags
SHARED_REFERENCE_TIME = 0xD5  # Q nanoseconds since power-on (shared field, any data set)
SHARED_FIRST = 0xD0
FIELD_LAYOUT = {SCALED_ACCEL: ">3f", SCALED_GYRO: ">3f", DELTA_THETA: ">3f", DELTA_VELOCITY: ">3f",
                COMP_QUATERNION: ">4f", GPS_TIMESTAMP: ">dHH", SHARED_REFERENCE_TIME: ">Q"}
FIELD_NAMES = {SCALED_ACCEL: "scaled accel", SCALED_GYRO: "scaled gyro", DELTA_THETA: "delta theta",
               DELTA_VELOCITY: "delta velocity", COMP_QUATERNION: "orientation quaternion",
               GPS_TIMESTAMP: "GPS timestamp", SHARED_REFERENCE_TIME: "reference timestamp"}

STANDARD_GRAVITY = 9.80665     # m/s^2 per g (DCP 5.1.1: 1 g = 9.80665 m/sec^2)
SECONDS_PER_WEEK = 604800.0
DEVICE_INFO_STRING = 16        # characters of each device information string (DCP 4.1.3)
_DEVICE_INFO = struct.Struct(">H16s16s16s16s16s")


class MipError(ValueError):
    """Bytes that are not a well-formed MIP packet or field; the message says what is wrong."""


def fletcher16(data, start: int = 0, end: int | None = None) -> int:
    """The MIP checksum of ``data[start:end]`` (DCP 6.4): two running 8-bit sums, MSB = the first."""
    a = b = 0
    for x in memoryview(bytes(data))[start:end]:
        a = (a + x) & 0xFF
        b = (b + a) & 0xFF
    return (a << 8) | b


def field(descriptor: int, data: bytes = b"") -> bytes:
    """One field: ``[2 + len(data), descriptor, data]``."""
    if len(data) > MAX_PAYLOAD - 2:
        raise MipError(f"field 0x{descriptor:02X}: {len(data)} bytes of data, at most {MAX_PAYLOAD - 2}")
    return bytes((len(data) + 2, descriptor)) + bytes(data)


def packet(descriptor_set: int, *fields: bytes) -> bytes:
    """A whole packet of ``fields`` (each from :func:`field`) with its header and checksum."""
    payload = b"".join(fields)
    if len(payload) > MAX_PAYLOAD:
        raise MipError(f"payload of {len(payload)} bytes, at most {MAX_PAYLOAD}")
    body = bytes((SYNC1, SYNC2, descriptor_set, len(payload))) + payload
    return body + fletcher16(body).to_bytes(2, "big")


def fields_of(payload: bytes) -> list[tuple[int, bytes]]:
    """``[(descriptor, data), ...]`` of a payload; MipError when a field's length byte is below 2 or runs past
    the payload (DCP 6.2)."""
    out, k = [], 0
    while k < len(payload):
        length = payload[k]
        if length < 2 or k + length > len(payload):
            raise MipError(f"field at byte {k} has length {length}; {len(payload) - k} bytes of payload remain")
        out.append((payload[k + 1], bytes(payload[k + 2:k + length])))
        k += length
    return out


def parse_packet(data: bytes) -> tuple[int, list[tuple[int, bytes]]]:
    """``(descriptor set, fields)`` of exactly one packet; MipError naming what is wrong."""
    data = bytes(data)
    if len(data) < HEADER_LENGTH + CHECKSUM_LENGTH or data[0] != SYNC1 or data[1] != SYNC2:
        raise MipError(f"not a MIP packet: {data[:8].hex(' ')}")
    end = HEADER_LENGTH + data[3]
    if len(data) != end + CHECKSUM_LENGTH:
        raise MipError(f"payload length {data[3]} but {len(data) - HEADER_LENGTH - CHECKSUM_LENGTH} bytes follow")
    expected, got = fletcher16(data, 0, end), int.from_bytes(data[end:end + 2], "big")
    if expected != got:
        raise MipError(f"checksum 0x{got:04X}, computed 0x{expected:04X}")
    return data[2], fields_of(data[HEADER_LENGTH:end])


class PacketSplitter:
    """Whole packets out of a byte stream (command time; the streaming path is :mod:`.stream`): bytes before
    a sync pair are skipped, a packet whose checksum fails counts in :attr:`corrupt` and the search resumes one
    byte after its first sync byte (DCP 6: the checksum is what tells a packet from data that looks like one)."""

    def __init__(self):
        self.buffer = bytearray()
        self.corrupt = 0
        self.skipped = 0

    def feed(self, data: bytes) -> list[tuple[int, list[tuple[int, bytes]]]]:
        self.buffer += data
        out = []
        buf = self.buffer
        while True:
            start = buf.find(bytes((SYNC1, SYNC2)))
            if start < 0:
                keep = 1 if buf[-1:] == bytes((SYNC1,)) else 0
                self.skipped += len(buf) - keep
                del buf[:len(buf) - keep]
                return out
            self.skipped += start
            del buf[:start]
            if len(buf) < HEADER_LENGTH:
                return out
            total = HEADER_LENGTH + buf[3] + CHECKSUM_LENGTH
            if len(buf) < total:
                return out
            try:
                out.append(parse_packet(buf[:total]))
            except MipError:
                self.corrupt += 1
                del buf[:1]
                continue
            del buf[:total]


# -- commands -------------------------------------------------------------------------------------------------
def ping() -> bytes:
    """Ping (0x01,0x01), DCP 4.1.1: ``75 65 01 02 02 01 E0 C6``."""
    return packet(BASE_CMD_SET, field(PING))


def set_to_idle() -> bytes:
    """Set to Idle (0x01,0x02), DCP 4.1.2: stops the data streams until Resume."""
    return packet(BASE_CMD_SET, field(SET_TO_IDLE))


def resume() -> bytes:
    """Resume (0x01,0x06), DCP 4.1.6: back to the mode before Set to Idle."""
    return packet(BASE_CMD_SET, field(RESUME))


def get_device_info() -> bytes:
    """Get Device Information (0x01,0x03), DCP 4.1.3: ``75 65 01 02 02 03 E2 C8``."""
    return packet(BASE_CMD_SET, field(GET_DEVICE_INFO))


def get_device_descriptors() -> bytes:
    """Get Device Descriptor Sets (0x01,0x04), DCP 4.1.4."""
    return packet(BASE_CMD_SET, field(GET_DEVICE_DESCRIPTORS))


def get_base_rate(descriptor_set: int = SENSOR_DATA_SET) -> bytes:
    """Get Base Rate (0x0C,0x0E) of a data set (CV7 DCP); its reply field 0x8E holds the set and the rate (Hz)."""
    return packet(CMD_3DM_SET, field(GET_BASE_RATE, bytes((descriptor_set,))))


def message_format(function: int, descriptor_set: int = SENSOR_DATA_SET, entries=()) -> bytes:
    """Message Format (0x0C,0x0F): ``function``, the data set, then ``(descriptor, decimation)`` per field --
    each field is sent every ``decimation`` base-rate periods."""
    body = bytes((function, descriptor_set, len(entries))) + b"".join(
        struct.pack(">BH", d, n) for d, n in entries)
    return packet(CMD_3DM_SET, field(MESSAGE_FORMAT, body))


def datastream_control(function: int, descriptor_set: int = SENSOR_DATA_SET, enable: bool = True) -> bytes:
    """Datastream Control (0x0C,0x11), DCP 4.2.7: enable or disable a data set's stream."""
    body = bytes((function, descriptor_set)) + (bytes((int(enable),)) if function == WRITE else b"")
    return packet(CMD_3DM_SET, field(CONTROL_DATA_STREAM, body))


def poll_data(descriptor_set: int, descriptors, suppress_ack: bool = False) -> bytes:
    """Poll Data (0x0C,0x0D): one packet of ``descriptors`` of a data set now."""
    body = bytes((descriptor_set, int(suppress_ack), len(descriptors))) + bytes(descriptors)
    return packet(CMD_3DM_SET, field(POLL_DATA, body))


# -- replies ------------------------------------------------------------------------------------------------
def ack_nack(command: int, code: int = ACK_OK) -> bytes:
    """The ACK/NACK field: the command's descriptor echoed and its error code (DCP 2.2.2)."""
    return field(ACK_NACK, bytes((command, code)))


@dataclass(frozen=True)
class DeviceInfo:
    """The Get Device Information reply field (0x81, DCP 4.1.3): the firmware version as the device gives it
    (e.g. 1108 for 1.1.08) and five 16-character strings, space-padded on the wire."""

    firmware_version: int
    model_name: str
    model_number: str = ""
    serial_number: str = ""
    lot_number: str = ""
    device_options: str = ""

    def encode(self) -> bytes:
        strings = (self.model_name, self.model_number, self.serial_number, self.lot_number, self.device_options)
        for s in strings:
            if len(s.encode("ascii")) > DEVICE_INFO_STRING:
                raise MipError(f"device information string {s!r} is longer than {DEVICE_INFO_STRING} characters")
        return _DEVICE_INFO.pack(self.firmware_version, *(s.encode("ascii").rjust(DEVICE_INFO_STRING)
                                                          for s in strings))

    @classmethod
    def decode(cls, data: bytes) -> "DeviceInfo":
        if len(data) != _DEVICE_INFO.size:
            raise MipError(f"device information field of {len(data)} bytes, expected {_DEVICE_INFO.size}")
        version, *strings = _DEVICE_INFO.unpack(data)
        return cls(version, *(s.decode("ascii", "replace").strip(" \0") for s in strings))

    @property
    def firmware(self) -> str:
        """As MicroStrain writes it: 1108 -> ``1.1.08``."""
        v = self.firmware_version
        return f"{v // 1000}.{v // 100 % 10}.{v % 100:02d}"


def descriptors_field(descriptors) -> bytes:
    """The Get Device Descriptor Sets reply field (0x82): one ``(set << 8) | descriptor`` u16 each."""
    return field(REPLY_DEVICE_DESCRIPTORS, b"".join(struct.pack(">H", d) for d in descriptors))


def decode_descriptors(data: bytes) -> list[int]:
    if len(data) % 2:
        raise MipError(f"descriptor list of {len(data)} bytes: not whole u16 values")
    return [int.from_bytes(data[k:k + 2], "big") for k in range(0, len(data), 2)]
