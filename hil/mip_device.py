"""The command side of an emulated MIP IMU: its identity, settings and the replies the DCP specifies.

:class:`MipDevice` takes each well-formed command packet and returns the reply packet the device sends:
one field per command field, each answered with the ACK/NACK field (DCP 2.2.2: the command's descriptor
echoed and an error code) and, for a read, its reply field. Error codes as MicroStrain's ``mip_sdk``
(``mip_cmd_result``): an unknown command is NACK 0x01 (command unknown), a parameter of the wrong size or
value NACK 0x03 (invalid parameter). A packet whose checksum fails gets no reply (the DCP reserves code 0x02;
the devices drop such packets). Handled:

* base set (DCP 4.1): Ping, Set to Idle, Get Device Information, Get Device Descriptor Sets, Built-In Test,
  Resume, Device Reset;
* 3DM set (DCP 4.2): Poll IMU Message (0x01) and Poll Data (0x0D), Get IMU Data Base Rate (0x06) and Get Base
  Rate (0x0E), IMU Message Format (0x08) and Message Format (0x0F) with every function selector, Datastream
  Control (0x11; the Generation 5 stream selector 0x01 or the data set 0x80), Device Startup Settings (0x30).

Streaming state: the device streams its IMU message when it is not idle, its IMU stream is enabled and the
format is not empty (DCP 4.1.2 / 4.1.6 / 4.2.7); the factory format is empty and the stream enabled.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from rtctl.drivers.mip import protocol as P

IMU_FIELDS = (P.SCALED_ACCEL, P.SCALED_GYRO, P.DELTA_THETA, P.DELTA_VELOCITY, P.COMP_QUATERNION, P.GPS_TIMESTAMP)
BASE_COMMANDS = (P.PING, P.SET_TO_IDLE, P.GET_DEVICE_INFO, P.GET_DEVICE_DESCRIPTORS, P.BUILT_IN_TEST, P.RESUME,
                 P.SOFT_RESET)
COMMANDS_3DM = (P.POLL_IMU_MESSAGE, P.GET_IMU_BASE_RATE, P.IMU_MESSAGE_FORMAT, P.POLL_DATA, P.GET_BASE_RATE,
                P.MESSAGE_FORMAT, P.CONTROL_DATA_STREAM, P.DEVICE_STARTUP_SETTINGS)
SUPPRESSED = -1    # a handler's code for a poll whose ACK/NACK the master asked to suppress


@dataclass(frozen=True)
class Identity:
    """What Get Device Information answers (DCP 4.1.3) and the IMU base rate (DCP 4.2.4: the 3DM-GX5's
    IMU base rate is 500 Hz, DCP 4.2.5)."""

    model_name: str = "3DM-GX5-25"
    model_number: str = "6251-4220"
    serial_number: str = "6251.00000"
    lot_number: str = ""
    device_options: str = "8g,300dps"
    firmware_version: int = 1108
    base_rate: int = 500

    def info(self) -> P.DeviceInfo:
        return P.DeviceInfo(self.firmware_version, self.model_name, self.model_number, self.serial_number,
                            self.lot_number, self.device_options)


@dataclass
class Settings:
    idle: bool = False
    stream_enabled: bool = True
    imu_format: list = field(default_factory=list)      # [(descriptor, decimation)]
    saved_format: list = field(default_factory=list)


class MipDevice:
    """The emulated device's command handling. ``poll`` is called with the descriptors of a polled IMU message
    and returns its data packet (the emulator's sensor model makes it)."""

    def __init__(self, identity: Identity, poll):
        self.identity = identity
        self.poll = poll
        self.settings = Settings()
        self.commands = 0
        self.nacks = 0
        self.received: list[tuple[int, int]] = []    # (descriptor set, command) of each command field, in order

    def descriptors(self) -> list[int]:
        return ([P.BASE_CMD_SET << 8 | d for d in BASE_COMMANDS] + [P.CMD_3DM_SET << 8 | d for d in COMMANDS_3DM]
                + [P.SENSOR_DATA_SET << 8 | d for d in IMU_FIELDS])

    @property
    def streaming(self) -> bool:
        s = self.settings
        return not s.idle and s.stream_enabled and bool(s.imu_format)

    def handle(self, descriptor_set: int, fields) -> list[bytes]:
        """The packets to send for one well-formed command packet (its reply, then any polled data)."""
        if descriptor_set not in (P.BASE_CMD_SET, P.CMD_3DM_SET):
            return []
        replies, after = [], []
        for descriptor, data in fields:
            self.commands += 1
            self.received.append((descriptor_set, descriptor))
            handler = (self._base if descriptor_set == P.BASE_CMD_SET else self._3dm)
            code, reply_fields, extra = handler(descriptor, data)
            if code not in (P.ACK_OK, SUPPRESSED):
                self.nacks += 1
            if code != SUPPRESSED:
                replies.append(P.ack_nack(descriptor, code))
            replies.extend(reply_fields)
            after.extend(extra)
        return ([P.packet(descriptor_set, *replies)] if replies else []) + after

    # -- base set ---------------------------------------------------------------------------------------------
    def _base(self, descriptor: int, data: bytes):
        s = self.settings
        if descriptor not in BASE_COMMANDS:
            return P.NACK_COMMAND_UNKNOWN, [], []
        if data:
            return P.NACK_INVALID_PARAM, [], []
        if descriptor == P.SET_TO_IDLE:
            s.idle = True
        elif descriptor == P.RESUME:
            s.idle = False
        elif descriptor == P.SOFT_RESET:
            self.settings = Settings(imu_format=list(s.saved_format), saved_format=s.saved_format)
        elif descriptor == P.GET_DEVICE_INFO:
            return P.ACK_OK, [P.field(P.REPLY_DEVICE_INFO, self.identity.info().encode())], []
        elif descriptor == P.GET_DEVICE_DESCRIPTORS:
            return P.ACK_OK, [P.descriptors_field(self.descriptors())], []
        elif descriptor == P.BUILT_IN_TEST:
            return P.ACK_OK, [P.field(0x83, bytes(4))], []   # DCP 4.1.5: u32 result, 0 = every test passed
        return P.ACK_OK, [], []

    # -- 3DM set ----------------------------------------------------------------------------------------------
    def _3dm(self, descriptor: int, data: bytes):
        handlers = {P.GET_IMU_BASE_RATE: self._imu_base_rate, P.GET_BASE_RATE: self._base_rate,
                    P.IMU_MESSAGE_FORMAT: self._imu_message_format, P.MESSAGE_FORMAT: self._message_format,
                    P.CONTROL_DATA_STREAM: self._datastream, P.DEVICE_STARTUP_SETTINGS: self._startup,
                    P.POLL_IMU_MESSAGE: self._poll_imu, P.POLL_DATA: self._poll_data}
        handler = handlers.get(descriptor)
        if handler is None:
            return P.NACK_COMMAND_UNKNOWN, [], []
        try:
            return handler(data)
        except (struct.error, IndexError, ValueError):
            return P.NACK_INVALID_PARAM, [], []

    def _imu_base_rate(self, data):
        if data:
            raise ValueError("no parameters")
        return P.ACK_OK, [P.field(P.REPLY_IMU_BASE_RATE, struct.pack(">H", self.identity.base_rate))], []

    def _base_rate(self, data):
        if len(data) != 1 or data[0] != P.SENSOR_DATA_SET:
            raise ValueError("only the IMU data set")
        return P.ACK_OK, [P.field(P.REPLY_BASE_RATE, struct.pack(">BH", P.SENSOR_DATA_SET,
                                                                   self.identity.base_rate))], []

    def _entries(self, data: bytes, count_at: int) -> list:
        n = data[count_at]
        body = data[count_at + 1:]
        if len(body) != 3 * n:
            raise ValueError("descriptor count and length disagree")
        entries = [struct.unpack(">BH", body[3 * k:3 * k + 3]) for k in range(n)]
        if any(d not in IMU_FIELDS or rate == 0 for d, rate in entries) or len({d for d, _ in entries}) != n:
            raise ValueError("a descriptor the IMU set does not have, twice, or at decimation 0")
        return entries

    def _format_function(self, function: int, data: bytes, count_at: int):
        s = self.settings
        if function == P.WRITE:
            s.imu_format = self._entries(data, count_at)
        elif function == P.READ:
            return s.imu_format
        elif function == P.SAVE:
            s.saved_format = list(s.imu_format)
        elif function == P.LOAD:
            s.imu_format = list(s.saved_format)
        elif function == P.DEFAULT:
            s.imu_format = []
        else:
            raise ValueError("function selector")
        return None

    def _imu_message_format(self, data):
        entries = self._format_function(data[0], data, 1)
        if entries is None:
            return P.ACK_OK, [], []
        body = bytes((len(entries),)) + b"".join(struct.pack(">BH", d, r) for d, r in entries)
        return P.ACK_OK, [P.field(P.REPLY_IMU_MESSAGE_FORMAT, body)], []

    def _message_format(self, data):
        if data[1] != P.SENSOR_DATA_SET:
            raise ValueError("only the IMU data set")
        entries = self._format_function(data[0], data, 2)
        if entries is None:
            return P.ACK_OK, [], []
        body = bytes((P.SENSOR_DATA_SET, len(entries))) + b"".join(struct.pack(">BH", d, r) for d, r in entries)
        return P.ACK_OK, [P.field(P.REPLY_MESSAGE_FORMAT, body)], []

    def _datastream(self, data):
        function, stream = data[0], data[1]
        if stream not in (P.LEGACY_IMU_STREAM, P.SENSOR_DATA_SET) and not (stream == P.ALL_STREAMS and function > 2):
            raise ValueError("stream selector")
        s = self.settings
        if function == P.WRITE:
            if len(data) != 3 or data[2] > 1:
                raise ValueError("enable flag")
            s.stream_enabled = bool(data[2])
        elif function == P.READ:
            return P.ACK_OK, [P.field(P.REPLY_DATASTREAM_ENABLE, bytes((stream, int(s.stream_enabled))))], []
        elif function == P.DEFAULT:
            s.stream_enabled = True
        elif function not in (P.SAVE, P.LOAD):
            raise ValueError("function selector")
        return P.ACK_OK, [], []

    def _startup(self, data):
        if len(data) != 1 or data[0] not in (P.SAVE, P.LOAD, P.DEFAULT):
            raise ValueError("function selector")
        s = self.settings
        if data[0] == P.SAVE:
            s.saved_format = list(s.imu_format)
        elif data[0] == P.LOAD:
            s.imu_format = list(s.saved_format)
        else:
            s.imu_format, s.stream_enabled = [], True
        return P.ACK_OK, [], []

    def _poll_imu(self, data):
        suppress, n = data[0], data[1]
        body = data[2:]
        if len(body) != 3 * n:
            raise ValueError("descriptor count and length disagree")
        descriptors = [body[3 * k] for k in range(n)] or [d for d, _ in self.settings.imu_format]
        if any(d not in IMU_FIELDS for d in descriptors):
            raise ValueError("descriptor")
        return (SUPPRESSED if suppress else P.ACK_OK), [], [self.poll(descriptors)]

    def _poll_data(self, data):
        data_set, suppress, n = data[0], data[1], data[2]
        descriptors = list(data[3:])
        if data_set != P.SENSOR_DATA_SET or len(descriptors) != n or any(d not in IMU_FIELDS for d in descriptors):
            raise ValueError("data set or descriptors")
        polled = self.poll(descriptors or [d for d, _ in self.settings.imu_format])
        return (SUPPRESSED if suppress else P.ACK_OK), [], [polled]
