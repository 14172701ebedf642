"""The ``mip`` sensor backend: a MicroStrain IMU (3DM-GX5 / 3DM-CV7 class) streaming MIP over a serial port.

``configure`` opens the port (pyserial), then, each command waiting for its ACK/NACK field (DCP 2.2.2):
Ping (0x01,0x01); Set to Idle (0x01,0x02); Get Device Information (0x01,0x03) -- a device whose model name or
firmware is not the configured ``model_name`` / ``firmware`` is refused with one line naming both; Get Device
Descriptor Sets (0x01,0x04) -- which fields and commands it has; the data set's base rate (0x0C,0x0E, or the
Generation 5 Get IMU Data Base Rate 0x0C,0x06); the message format (0x0C,0x0F, or 0x0C,0x08) of scaled
accelerometer and gyro, delta theta and delta velocity, the orientation quaternion where the device has one,
and a device time stamp (the shared reference timestamp 0xD5, else the GPS timestamp 0x12), at ``rate``;
Datastream Control (0x0C,0x11) enabling the stream. ``activate`` sends Resume (0x01,0x06): the stream
starts; ``deactivate`` sends Set to Idle.

Every cycle :meth:`MipImu.receive` reads what the port holds without blocking (FIONREAD, then ``os.readv``
into a preallocated buffer) and :func:`.stream.scan` parses it; nothing is allocated per packet. No packet's
motion is lost when several arrived since the last read (the loop outran the device's stream, or the device
sent a burst): the reading is made of them all (:func:`imu_values`: the mean rate and specific force over
their span), stamped as the newest, and ``health.extra["merged_packets"]`` counts the packets that reached a
reading with a newer one. Units are
converted here and only here: g to m/s^2 (9.80665), and the attitude, which MIP gives in the NED frame
(``p_sensor = q^-1 p_ned q``), to rtctl's z-up world through :data:`WORLD_FROM_NED` (world x = north,
y = west, z = up: a half turn about north). Vectors stay in the device's own axes, which are the sensor
frame: ``mount_rpy`` says how the device sits on its link. With ``use_deltas`` the rates are delta theta and
delta velocity over the message period (coning- and sculling-integrated on the device) instead of the
scaled samples.

Faults (one line each, latched): ``max_corrupt_burst`` consecutive packets failing their checksum; a
non-finite or saturated (at ``accel_range`` / ``gyro_range``) value in any data packet, the newest or not; a port error; the base
class adds the stale watchdog (``max_age``).
"""
from __future__ import annotations

import array
import fcntl
import os
import select
import termios
import time
from dataclasses import dataclass

import numpy as np
from numba import njit

from rtctl.options import setting

from ..sensor import IMU, Sensor
from . import protocol as P
from . import stream as S

WORLD_FROM_NED = (1.0, 0.0, 0.0, 0.0)   # quaternion (x, y, z, w): rtctl's world from MIP's NED frame
RAW_NAMES = ("scaled accel x", "scaled accel y", "scaled accel z", "scaled gyro x", "scaled gyro y",
             "scaled gyro z", "delta theta x", "delta theta y", "delta theta z", "delta velocity x",
             "delta velocity y", "delta velocity z", "quaternion w", "quaternion x", "quaternion y", "quaternion z")
SATURATED = 100   # imu_values' status for a saturated value: SATURATED + its index in the sample
MISSING = 200     # imu_values' status for a batch without the fields the reading is made of
AT_RANGE = 1.0 - 1e-6   # share of the range a value reaches when clipped there (float32 rounds it by 6e-8)


class DeviceError(RuntimeError):
    """Configuration-time trouble with the device (no reply, a NACK, another model): one line."""


@njit(cache=True)
def quaternion_product(ax, ay, az, aw, bx, by, bz, bw):
    """Hamilton product a b of quaternions given as (x, y, z, w)."""
    return (aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz)


@njit(cache=True)
def imu_values(sample, values, use_deltas, period, accel_limit, gyro_limit, world_from_ned):
    """The batch of ``sample`` (every data packet since the last reading, :func:`.stream.merge_packet`) as the
    reading's ``values``, and the batch taken: specific force (m/s^2) and angular rate (rad/s) over the batch's
    span, orientation (x, y, z, w) in the z-up world from the newest packet, NaN without a quaternion.

    With ``use_deltas`` the rates are the summed delta velocity and delta theta (3DM-GX5 DCP 5.1.6 and 5.1.5,
    0x80,0x08 and 0x80,0x07: each the integral over the interval the message format sets, ``period``) over the
    summed intervals: the mean specific force and rate over the batch's span, exactly. Else the mean of the
    packets' scaled accel and gyro (DCP 5.1.1 and 5.1.2, 0x80,0x04 and 0x80,0x05: instantaneous). Returns -1; or :data:`MISSING` when a packet lacked a
    field the reading needs; or the sample index of the batch's first non-finite value; or :data:`SATURATED` plus
    that of the first accel or gyro axis some packet put at its range."""
    sample[S.S_TAKEN] = 1.0
    merged = sample[S.S_MERGED]
    every = np.int64(sample[S.S_ALL_PRESENT])
    need = (S.P_DTHETA | S.P_DVEL) if use_deltas else (S.P_ACCEL | S.P_GYRO)
    if merged < 1.0 or every & need != need:
        return MISSING
    if sample[S.S_BAD] >= 0.0:
        return np.int64(sample[S.S_BAD])
    for k in range(6):
        limit = accel_limit if k < 3 else gyro_limit
        if abs(sample[S.S_PEAK + k]) >= limit * AT_RANGE and every & (S.P_ACCEL if k < 3 else S.P_GYRO):
            return SATURATED + S.S_ACCEL + k
    span = merged * period
    for k in range(3):
        if use_deltas:
            values[k] = sample[S.S_SUM + S.S_DVEL + k] / span * P.STANDARD_GRAVITY
            values[3 + k] = sample[S.S_SUM + S.S_DTHETA + k] / span
        else:
            values[k] = sample[S.S_SUM + S.S_ACCEL + k] / merged * P.STANDARD_GRAVITY
            values[3 + k] = sample[S.S_SUM + S.S_GYRO + k] / merged
    if np.int64(sample[S.S_PRESENT]) & S.P_QUAT:
        w, x, y, z = sample[S.S_QUAT], sample[S.S_QUAT + 1], sample[S.S_QUAT + 2], sample[S.S_QUAT + 3]
        qx, qy, qz, qw = quaternion_product(world_from_ned[0], world_from_ned[1], world_from_ned[2],
                                            world_from_ned[3], x, y, z, w)
        if qw < 0.0:
            qx, qy, qz, qw = -qx, -qy, -qz, -qw
        values[6], values[7], values[8], values[9] = qx, qy, qz, qw
    else:
        values[6] = values[7] = values[8] = values[9] = np.nan
    return -1


@njit(cache=True)
def append_and_scan(buf, fill, rx, n, sample, counters):
    """``rx[:n]`` appended to ``buf[:fill]``, then :func:`.stream.scan`; the bytes left for the next read."""
    for k in range(n):
        buf[fill + k] = rx[k]
    return S.scan(buf, fill + n, sample, counters)


def device_seconds(sample) -> float:
    """The sample's time on the device's clock (s): the reference timestamp, else GPS week and time of week."""
    present = int(sample[S.S_PRESENT])
    if present & S.P_REFERENCE_TIME:
        return sample[S.S_REFERENCE_NS] * 1e-9
    if present & S.P_GPS_TIME:
        return sample[S.S_WEEK] * P.SECONDS_PER_WEEK + sample[S.S_TOW]
    return float("nan")


class MipImu(Sensor):
    """A MIP inertial sensor on a serial port (kind ``imu``)."""

    kinds = (IMU,)

    @dataclass(frozen=True)
    class Options(Sensor.Options):
        port: str = setting("str", None, required=True)          # serial device, e.g. /dev/ttyACM0
        baudrate: int = setting("int", 921600, positive=True)
        rate: float = setting("float", 500.0, positive=True)      # Hz of the data stream
        model_name: str = setting("str", None)                   # e.g. "3DM-GX5-25": another device is refused
        firmware: str = setting("str", None)                     # e.g. "1.1.08": another firmware is refused
        orientation: bool = setting("bool", True)                # stream the device's attitude when it has one
        use_deltas: bool = setting("bool", False)                # rates from delta theta / delta velocity
        accel_range: float = setting("float", 8.0, positive=True)     # g: a value this large is saturated
        gyro_range: float = setting("float", 5.235987755982989, positive=True)   # rad/s (300 deg/s)
        max_corrupt_burst: int = setting("int", 5, low=1)       # consecutive bad checksums -> fault
        command_timeout: float = setting("float", 0.5, positive=True, high=10.0)   # s per configure command

    @property
    def sample_period(self) -> float:
        """The message period (s): ``1 / rate``, the base rate's divisor over it once configured."""
        return self.period

    def __init__(self, model, options: "MipImu.Options | None" = None):
        super().__init__(model, options)
        self.serial = None
        self._fd = -1
        self._rx = np.zeros(S.BUFFER_BYTES, dtype=np.uint8)
        self._iov = [memoryview(self._rx)]
        self._buf = np.zeros(S.BUFFER_BYTES + P.MAX_PACKET, dtype=np.uint8)
        self._fill = 0
        self._available = array.array("i", [0])
        self.sample = S.new_sample()
        self.counters = S.new_counters()
        self._samples_seen = 0
        self.health.extra["merged_packets"] = 0   # packets that reached a reading with a newer one (imu_values)
        self._world_from_ned = np.array(WORLD_FROM_NED)
        self.device_info: P.DeviceInfo | None = None
        self.descriptors: list[int] = []
        self.base_rate = 0
        self.decimation = 0
        self.period = 1.0 / self.options.rate
        self.fields: list[int] = []

    # -- configuration (may block, may raise) -----------------------------------------------------------
    def on_configure(self) -> None:
        import serial

        self._close()
        o = self.options
        try:
            self.serial = serial.Serial(o.port, o.baudrate, timeout=0, exclusive=True)
        except (serial.SerialException, OSError) as exc:
            raise DeviceError(f"{self.name}: cannot open {o.port}: {exc}") from None
        self._fd = self.serial.fileno()
        try:
            self._configure_device()
        except BaseException:
            self._close()      # a refused device leaves no port open behind it
            raise

    def _configure_device(self) -> None:
        self.command(P.ping(), P.BASE_CMD_SET, P.PING, "ping")
        self.command(P.set_to_idle(), P.BASE_CMD_SET, P.SET_TO_IDLE, "set to idle")
        self.serial.reset_input_buffer()
        self.device_info = info = self._device_info()
        self._check_identity(info)
        self.descriptors = self._descriptors()
        self.fields = self._fields()
        self.base_rate = self._base_rate()
        self.decimation = self._decimation()
        self.period = self.decimation / self.base_rate
        self._write_message_format()
        self._enable_stream()

    def on_activate(self) -> None:
        super().on_activate()
        self._fill = 0
        self.counters[:] = 0
        self._samples_seen = 0
        self.sample[S.S_TAKEN] = 1.0          # nothing from before the stream resumed goes into a reading
        self.health.extra["merged_packets"] = 0
        self.command(P.resume(), P.BASE_CMD_SET, P.RESUME, "resume")

    def on_deactivate(self) -> None:
        try:
            self.command(P.set_to_idle(), P.BASE_CMD_SET, P.SET_TO_IDLE, "set to idle")
        except (DeviceError, OSError):
            pass    # leaving: the port may be gone; the device idles or streams into nothing

    def close(self) -> None:
        """Close the port (after deactivate)."""
        self._close()

    def _close(self) -> None:
        if self.serial is not None:
            try:
                self.serial.close()
            except OSError:
                pass
        self.serial, self._fd = None, -1

    def command(self, packet: bytes, descriptor_set: int, command: int, what: str) -> list[tuple[int, bytes]]:
        """Send a command packet and wait for its ACK/NACK field; the reply's other fields. DeviceError for a
        NACK (naming its error code) or no reply within ``command_timeout``. Data packets that come with the
        reply (a device that streams at once on Resume) are kept for the stream, as a read would have taken
        them."""
        o = self.options
        os.write(self._fd, packet)
        splitter = P.PacketSplitter()
        deadline = time.monotonic() + o.command_timeout
        reply = None
        while reply is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select((self._fd,), (), (), remaining)[0]:
                raise DeviceError(f"{self.name}: no reply to {what} from {o.port} within {o.command_timeout:g} s")
            for reply_set, fields in splitter.feed(os.read(self._fd, 4096)):
                if reply_set == P.SENSOR_DATA_SET:
                    self._keep(P.packet(reply_set, *(P.field(desc, d) for desc, d in fields)))
                elif reply is None and reply_set == descriptor_set:
                    ack = [d for desc, d in fields if desc == P.ACK_NACK and len(d) == 2 and d[0] == command]
                    if ack:
                        reply = ack[0][1], fields
        self._keep(bytes(splitter.buffer))     # the start of a packet that came behind the reply
        code, fields = reply
        if code != P.ACK_OK:
            raise DeviceError(f"{self.name}: the device on {o.port} refused {what}: NACK 0x{code:02X} "
                              f"({P.NACK_NAMES.get(code, 'unknown error')})")
        return [(desc, d) for desc, d in fields if desc != P.ACK_NACK]

    def _keep(self, data: bytes) -> None:
        """Bytes of the stream that came with a command's reply: into the stream buffer and parsed, as
        :meth:`receive` parses what it reads (command time only)."""
        n = min(len(data), len(self._rx), len(self._buf) - self._fill)
        if n:
            self._rx[:n] = np.frombuffer(data[:n], dtype=np.uint8)
            self._fill = append_and_scan(self._buf, self._fill, self._rx, n, self.sample, self.counters)

    def _reply_field(self, fields, descriptor: int, what: str) -> bytes:
        for desc, data in fields:
            if desc == descriptor:
                return data
        raise DeviceError(f"{self.name}: the reply to {what} from {self.options.port} has no field 0x{descriptor:02X}")

    def _device_info(self) -> P.DeviceInfo:
        fields = self.command(P.get_device_info(), P.BASE_CMD_SET, P.GET_DEVICE_INFO, "get device information")
        try:
            return P.DeviceInfo.decode(self._reply_field(fields, P.REPLY_DEVICE_INFO, "get device information"))
        except P.MipError as exc:
            raise DeviceError(f"{self.name}: device information from {self.options.port}: {exc}") from None

    def _check_identity(self, info: P.DeviceInfo) -> None:
        o = self.options
        wrong = []
        if o.model_name is not None and info.model_name != o.model_name:
            wrong.append(f"model {info.model_name!r} where {o.model_name!r} is configured")
        if o.firmware is not None and info.firmware != o.firmware:
            wrong.append(f"firmware {info.firmware} where {o.firmware} is configured")
        if wrong:
            raise DeviceError(f"{self.name}: the device on {o.port} is {info.model_name!r} (firmware {info.firmware}, "
                              f"serial {info.serial_number!r}): {'; '.join(wrong)}")

    def _descriptors(self) -> list[int]:
        fields = self.command(P.get_device_descriptors(), P.BASE_CMD_SET, P.GET_DEVICE_DESCRIPTORS,
                              "get device descriptors")
        try:
            return P.decode_descriptors(self._reply_field(fields, P.REPLY_DEVICE_DESCRIPTORS,
                                                          "get device descriptors"))
        except P.MipError as exc:
            raise DeviceError(f"{self.name}: descriptors from {self.options.port}: {exc}") from None

    def _has(self, descriptor_set: int, descriptor: int) -> bool:
        return (descriptor_set << 8 | descriptor) in self.descriptors

    def _fields(self) -> list[int]:
        s = P.SENSOR_DATA_SET
        missing = [P.FIELD_NAMES[d] for d in (P.SCALED_ACCEL, P.SCALED_GYRO, P.DELTA_THETA, P.DELTA_VELOCITY)
                   if not self._has(s, d)]
        if missing:
            raise DeviceError(f"{self.name}: the device on {self.options.port} ({self.device_info.model_name}) has "
                              f"no {', '.join(missing)} in its IMU data set")
        fields = [P.SCALED_ACCEL, P.SCALED_GYRO, P.DELTA_THETA, P.DELTA_VELOCITY]
        if self.options.orientation and self._has(s, P.COMP_QUATERNION):
            fields.append(P.COMP_QUATERNION)
        if self._has(s, P.SHARED_REFERENCE_TIME):
            fields.append(P.SHARED_REFERENCE_TIME)
        elif self._has(s, P.GPS_TIMESTAMP):
            fields.append(P.GPS_TIMESTAMP)
        return fields

    def _base_rate(self) -> int:
        if self._has(P.CMD_3DM_SET, P.GET_BASE_RATE):
            fields = self.command(P.get_base_rate(P.SENSOR_DATA_SET), P.CMD_3DM_SET, P.GET_BASE_RATE, "get base rate")
            data = self._reply_field(fields, P.REPLY_BASE_RATE, "get base rate")
            rate = int.from_bytes(data[1:3], "big") if len(data) == 3 and data[0] == P.SENSOR_DATA_SET else 0
        else:
            fields = self.command(P.packet(P.CMD_3DM_SET, P.field(P.GET_IMU_BASE_RATE)), P.CMD_3DM_SET,
                                  P.GET_IMU_BASE_RATE, "get IMU base rate")
            data = self._reply_field(fields, P.REPLY_IMU_BASE_RATE, "get IMU base rate")
            rate = int.from_bytes(data, "big") if len(data) == 2 else 0
        if rate <= 0:
            raise DeviceError(f"{self.name}: the device on {self.options.port} gave base rate {data.hex(' ')}")
        return rate

    def _decimation(self) -> int:
        decimation = self.base_rate / self.options.rate
        if abs(decimation - round(decimation)) > 1e-9 or round(decimation) < 1:
            raise DeviceError(f"{self.name}: rate {self.options.rate:g} Hz is not the base rate {self.base_rate} Hz "
                              f"of the device on {self.options.port} divided by a whole number")
        return int(round(decimation))

    def _write_message_format(self) -> None:
        entries = [(d, self.decimation) for d in self.fields]
        if self._has(P.CMD_3DM_SET, P.MESSAGE_FORMAT):
            self.command(P.message_format(P.WRITE, P.SENSOR_DATA_SET, entries), P.CMD_3DM_SET, P.MESSAGE_FORMAT,
                         "message format")
        else:
            body = bytes((P.WRITE, len(entries))) + b"".join(d.to_bytes(1, "big") + n.to_bytes(2, "big")
                                                          for d, n in entries)
            self.command(P.packet(P.CMD_3DM_SET, P.field(P.IMU_MESSAGE_FORMAT, body)), P.CMD_3DM_SET,
                         P.IMU_MESSAGE_FORMAT, "IMU message format")

    def _enable_stream(self) -> None:
        stream = P.SENSOR_DATA_SET if self._has(P.CMD_3DM_SET, P.MESSAGE_FORMAT) else P.LEGACY_IMU_STREAM
        self.command(P.datastream_control(P.WRITE, stream, True), P.CMD_3DM_SET, P.CONTROL_DATA_STREAM,
                     "enable data stream")

    # -- every cycle: never raises, never blocks ------------------------------------------------------------
    def receive(self, reading, now: float) -> bool:
        if self._fd < 0:
            return False
        try:
            fcntl.ioctl(self._fd, termios.FIONREAD, self._available, True)
            n = os.readv(self._fd, self._iov) if self._available[0] > 0 else 0
        except OSError as exc:
            self.health.timeouts += 1
            self.health.set_fault(f"{self.name}: reading {self.options.port} failed: {exc.strerror or exc} (the "
                                  f"device is gone)")
            return False
        if n:
            self._fill = append_and_scan(self._buf, self._fill, self._rx, n, self.sample, self.counters)
        counters = self.counters
        self.health.corrupt = int(counters[S.C_CORRUPT])
        if counters[S.C_CORRUPT_RUN] >= self.options.max_corrupt_burst:
            self.health.set_fault(f"{self.name}: {int(counters[S.C_CORRUPT_RUN])} consecutive MIP packets from "
                                  f"{self.options.port} failed their checksum (max_corrupt_burst "
                                  f"{self.options.max_corrupt_burst})")
        if counters[S.C_SAMPLES] == self._samples_seen:
            return False
        self._samples_seen = counters[S.C_SAMPLES]
        o = self.options
        status = imu_values(self.sample, reading.values, o.use_deltas, self.period, o.accel_range, o.gyro_range,
                            self._world_from_ned)
        if status >= 0:
            self._bad_sample(status)
            return False
        merged = int(self.sample[S.S_MERGED]) - 1
        if merged:
            self.health.extra["merged_packets"] += merged
        reading.device_stamp = device_seconds(self.sample)
        return True

    def _bad_sample(self, status: int) -> None:
        self.health.corrupt += 1
        if status == MISSING:
            self.health.set_fault(f"{self.name}: a data packet without the fields configured")
        elif status >= SATURATED:
            k = status - SATURATED
            limit = f"{self.options.accel_range:g} g" if k < 3 else f"{self.options.gyro_range:g} rad/s"
            self.health.set_fault(f"{self.name}: {RAW_NAMES[k]} saturated: {self.sample[S.S_PEAK + k]:g} at the "
                                  f"range +-{limit}")
        else:
            self.health.set_fault(f"{self.name}: {RAW_NAMES[status]} is {self.sample[S.S_BAD_VALUE]} in a data "
                                  f"packet from {self.options.port}")

    def warm(self, cycle) -> None:
        """Compile the parse and conversion kernels on a packet made here (the port is not touched)."""
        payload = b"".join(P.field(d, bytes(12)) for d in (P.SCALED_ACCEL, P.SCALED_GYRO, P.DELTA_THETA,
                                                            P.DELTA_VELOCITY))
        data = P.packet(P.SENSOR_DATA_SET, payload, P.field(P.COMP_QUATERNION, bytes(16)),
                        P.field(P.GPS_TIMESTAMP, bytes(12)), P.field(P.SHARED_REFERENCE_TIME, bytes(8)))
        rx = np.frombuffer(data, dtype=np.uint8).copy()
        buf = np.zeros_like(self._buf)
        sample, counters = S.new_sample(), S.new_counters()
        append_and_scan(buf, 0, rx, len(data), sample, counters)
        imu_values(sample, np.zeros(10), False, 1.0, 1.0, 1.0, self._world_from_ned)
