"""The ``netft`` sensor backend: an ATI Net F/T six-axis force-torque sensor over RDT (:mod:`.protocol`).

Lifecycle: ``configure`` reads the calibration over TCP (the Read Calibration Info command: counts per force
and per torque and their units; or takes ``counts_per_force`` / ``counts_per_torque`` from the config, in
counts per N and per N m) and opens a UDP socket connected to the device (only its datagrams are received);
``activate`` asks for high-speed real-time streaming of every record until stopped (or buffered streaming,
``buffered``) and, with ``bias_on_activate``, sets the device's software bias; ``deactivate`` stops the stream.
:meth:`NetFT.bias` sends the bias command on demand (the device then reads zero under its present load).

Every cycle :meth:`NetFT.receive` takes whatever datagrams arrived, without blocking (at most
``max_datagrams``), keeps the newest record, converts its counts to N and N m and reorders them to
Featherstone's ``[torque; force]`` in the sensor's frame (the device's own axes). Lost records (gaps in
``rdt_sequence``) are counted in ``health.extra["rdt_lost"]``, records older than the newest dropped in
``health.extra["rdt_stale"]``, datagrams that are no whole records in ``health.corrupt``. The device clock
(``ft_sequence`` at 7000 per second, unwrapped) is the reading's ``device_stamp``. A status code with an
error bit latches a fault with one line naming the bits; a device that stops sending trips the stale
watchdog of :class:`~rtctl.drivers.sensor.Sensor`.
"""
from __future__ import annotations

import socket
from dataclasses import dataclass

import numpy as np

from rtctl.options import setting

from ..sensor import FORCE_TORQUE, Sensor
from . import protocol as P


def read_calibration(host: str, port: int, timeout: float) -> P.Calibration:
    """The Read Calibration Info exchange over TCP (sec. 11.5-11.6); OSError or ValueError on failure."""
    with socket.create_connection((host, port), timeout=timeout) as conn:
        conn.sendall(P.calibration_request())
        data = b""
        while len(data) < P.CALIBRATION.size:
            chunk = conn.recv(P.CALIBRATION.size - len(data))
            if not chunk:
                raise ValueError(f"the connection closed after {len(data)} of {P.CALIBRATION.size} bytes")
            data += chunk
    return P.Calibration.parse(data)


class NetFT(Sensor):
    """An ATI Net F/T on the network (module docstring)."""

    kinds = (FORCE_TORQUE,)

    @dataclass(frozen=True)
    class Options(Sensor.Options):
        kind: str = setting("str", FORCE_TORQUE, choices=(FORCE_TORQUE,))   # a six-axis force-torque sensor
        host: str = setting("str", None, required=True)                 # the Net F/T's address
        rdt_port: int = setting("int", P.RDT_PORT, low=1, high=65535)   # UDP, the records (the device: 49152)
        tcp_port: int = setting("int", P.TCP_PORT, low=1, high=65535)   # TCP, the calibration (49151)
        counts_per_force: float = setting("float", None, positive=True)   # per N; None: read from the device
        counts_per_torque: float = setting("float", None, positive=True)  # per N m
        buffered: bool = setting("bool", False)             # buffered streaming (several records per datagram)
        bias_on_activate: bool = setting("bool", False)     # the device's software bias once streaming
        max_datagrams: int = setting("int", 64, low=1, high=10000)   # read per cycle at most
        timeout: float = setting("float", 1.0, positive=True)         # s, for the calibration over TCP

    def __init__(self, model, options: "NetFT.Options | None" = None):
        super().__init__(model, options)
        o = self.options
        if (o.counts_per_force is None) != (o.counts_per_torque is None):
            raise ValueError(f"{self.name}: give both counts_per_force and counts_per_torque, or neither (then "
                             "they are read from the device)")
        self.where = f"{o.host}:{o.rdt_port}"
        self.sock: socket.socket | None = None
        self.calibration: P.Calibration | None = None
        self._per_unit = np.ones(6)                   # counts per N (Fx, Fy, Fz) and per N m (Tx, Ty, Tz)
        self._counts = np.zeros(6)
        self._state = P.parser_state()
        self._buffer = bytearray(P.RECORD_SIZE * P.MAX_RECORDS_PER_DATAGRAM + 1)
        self._data = np.frombuffer(self._buffer, dtype=np.uint8)
        self._corrupt = 0

    # -- lifecycle ---------------------------------------------------------------------------------
    def on_configure(self) -> None:
        o = self.options
        if o.counts_per_force is None:
            try:
                self.calibration = read_calibration(o.host, o.tcp_port, o.timeout)
            except (OSError, ValueError) as exc:
                raise ValueError(f"{self.name}: calibration from {o.host}:{o.tcp_port}: "
                                 f"{exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}") from None
            force, torque = self.calibration.counts_per_si()
        else:
            force, torque = o.counts_per_force, o.counts_per_torque
        self._per_unit[:3], self._per_unit[3:] = force, torque
        self._close_socket()
        try:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.sock.connect((o.host, o.rdt_port))
            self.sock.setblocking(False)
        except OSError as exc:
            self._close_socket()
            raise ValueError(f"{self.name}: RDT socket to {self.where}: {exc.strerror or exc}") from None

    def on_activate(self) -> None:
        super().on_activate()
        self._drain()
        self._state[:] = P.parser_state()
        self._send(P.START_BUFFERED if self.options.buffered else P.START_REALTIME)
        if self.options.bias_on_activate:
            self.bias()

    def on_deactivate(self) -> None:
        self._send(P.STOP)
        self.health.extra.update(self.counters())

    def close(self) -> None:
        self._close_socket()

    def _close_socket(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def bias(self) -> None:
        """Send the set-software-bias command: the device reads zero under its present load from then on."""
        self._send(P.SET_SOFTWARE_BIAS)

    def _send(self, command: int) -> None:
        if self.sock is None:
            return
        try:
            self.sock.send(P.rdt_request(command))
        except OSError as exc:   # nothing listens there: the stale watchdog trips if no record comes
            self.health.timeouts += 1
            self.health.extra["last_send_error"] = f"{P.COMMANDS[command]}: {exc.strerror or exc}"

    def _drain(self) -> None:
        for _ in range(10000):
            try:
                self.sock.recv_into(self._buffer)
            except OSError:
                return

    def counters(self) -> dict:
        """The parser's counts: records taken, lost (sequence gaps), stale (repeated or older), corrupt
        datagrams."""
        s = self._state
        return {"rdt_records": int(s[P.ST_RECORDS]), "rdt_lost": int(s[P.ST_GAPS]),
                "rdt_stale": int(s[P.ST_STALE]), "corrupt_datagrams": int(s[P.ST_CORRUPT])}

    # -- the cycle ----------------------------------------------------------------------------------
    def receive(self, reading, now: float) -> bool:
        sock, state = self.sock, self._state
        if sock is None:
            return False
        fresh = 0
        for _ in range(self.options.max_datagrams):
            try:
                n = sock.recv_into(self._buffer)
            except BlockingIOError:
                break
            except OSError:            # ICMP port unreachable on a connected socket: the device is not there
                self.health.timeouts += 1
                break
            fresh += P.take_records(self._data, n, state, self._counts)
        if state[P.ST_CORRUPT] != self._corrupt:
            self.health.corrupt += int(state[P.ST_CORRUPT]) - self._corrupt
            self._corrupt = int(state[P.ST_CORRUPT])
        if not fresh:
            return False
        status = int(state[P.ST_STATUS])
        if P.status_errors(status):
            self.health.set_fault(f"{self.name}: Net F/T at {self.where} reports status {P.describe_status(status)}")
            return False
        np.divide(self._counts[:3], self._per_unit[:3], out=reading.force)
        np.divide(self._counts[3:], self._per_unit[3:], out=reading.torque)
        reading.device_stamp = P.device_seconds(state)
        return True
