"""An emulated CANopen device (CiA 301 slave): NMT, SDO server, PDOs, SYNC, heartbeat producer and consumer, EMCY.

What a conforming device does, section by section of CiA 301 (v4.2):

* NMT (7.3.2): after power-on and after Reset Node / Reset Communication the device sends its boot-up
  message (COB-ID 0x700 + node ID, one byte 0x00) and enters PRE-OPERATIONAL on its own. Commands
  (COB-ID 0x000, ``[cs, node ID or 0]``): 0x01 start, 0x02 stop, 0x80 enter pre-operational, 0x81 reset node
  (application and communication objects back to their power-on values), 0x82 reset communication
  (0x1000-0x1FFF only). Services per state (7.3.2.2.4): SDO, SYNC and EMCY in PRE-OPERATIONAL and
  OPERATIONAL, PDOs only in OPERATIONAL, in STOPPED nothing but NMT and heartbeat.
* SDO (7.2.4, abort codes table 22): canopen's ``SdoServer`` does the protocol; the object access here
  answers 0x06020000 (object does not exist), 0x06090011 (sub-index does not exist, also for a sub-index other
  than 0 of a VAR), 0x06010001/0x06010002 (write-only/read-only), 0x06070010 (length does not match the data
  type), 0x06090031/0x06090032 (value above/below the object's range), 0x06090030 (value range of a
  parameter, e.g. a reserved transmission type), 0x06090036 (maximum below minimum), 0x06040043
  (parameter incompatibility, e.g. two consumer-heartbeat entries for one node).
* PDO (7.2.2, 7.5.2.35-7.5.2.38): the COB-ID's CAN-ID cannot change while the PDO is valid (0x06090030);
  mapping entries are written only while the PDO is not valid and its sub-index 0 is 0 (0x08000022), an
  entry must name an existing, mappable object of its length (0x06040041), and enabling a mapping whose
  total exceeds 64 bits is refused (0x06040042). Transmission types: 0 (synchronous acyclic: sent at the SYNC
  after its data changed; an RPDO applies at the next SYNC), 1-240 (every n-th SYNC), 254/255 (event driven:
  on a change of the mapped data, no more often than the inhibit time in 100 us, and at least every event
  timer in ms; an RPDO applies at once). An RPDO shorter than its mapping is not processed (EMCY 0x8210).
* Heartbeat (7.2.8.3.2): producer period 0x1017 (ms, 0 off). Consumer 0x1016: entries
  ``node ID << 16 | time in ms``; monitoring of an entry starts at the first heartbeat received from that
  node; a heartbeat older than the time is a heartbeat event: EMCY 0x8130 and the error behaviour 0x1029:01
  (0: enter PRE-OPERATIONAL from OPERATIONAL, 1: no change, 2: enter STOPPED), then the application's own
  reaction (:meth:`CanopenDevice.on_heartbeat_lost`).
* EMCY (7.2.7): COB-ID 0x80 + node ID, ``error code (u16 LE), error register 0x1001, 5 bytes manufacturer``;
  an error reset is signalled by error code 0x0000.

Times are ``time.monotonic()`` seconds (comparable between processes on one machine).
"""
from __future__ import annotations

import struct

import canopen
from canopen import objectdictionary as cod
from canopen.sdo import SdoAbortedError

from rtctl.drivers.can import objects as ob

INITIALISING, STOPPED, OPERATIONAL, PRE_OPERATIONAL = 0, 4, 5, 127
NMT_NAMES = {INITIALISING: "INITIALISING", STOPPED: "STOPPED", OPERATIONAL: "OPERATIONAL",
             PRE_OPERATIONAL: "PRE-OPERATIONAL"}
# Abort codes (CiA 301 table 22).
OBJECT_DOES_NOT_EXIST, SUBINDEX_DOES_NOT_EXIST = 0x06020000, 0x06090011
WRITE_ONLY, READ_ONLY, LENGTH_MISMATCH = 0x06010001, 0x06010002, 0x06070010
VALUE_RANGE, VALUE_TOO_HIGH, VALUE_TOO_LOW, MAX_BELOW_MIN = 0x06090030, 0x06090031, 0x06090032, 0x06090036
CANNOT_MAP, PDO_TOO_LONG, INCOMPATIBLE, DEVICE_STATE = 0x06040041, 0x06040042, 0x06040043, 0x08000022
# Emergency error codes (CiA 301 table 21).
EMCY_HEARTBEAT, EMCY_PDO_LENGTH = 0x8130, 0x8210


class _SdoNode(canopen.LocalNode):
    """canopen's local node as the SDO server's object access, with CiA 301's checks in front."""

    def __init__(self, device, node_id, od):
        super().__init__(node_id, od)
        self.device = device

    def _find_object(self, index, subindex):
        obj = super()._find_object(index, subindex)
        if isinstance(self.object_dictionary[index], cod.ODVariable) and subindex != 0:
            raise SdoAbortedError(SUBINDEX_DOES_NOT_EXIST)
        return obj

    def get_data(self, index, subindex, check_readable=False):
        obj = self._find_object(index, subindex)
        if check_readable and not obj.readable:
            raise SdoAbortedError(WRITE_ONLY)
        return obj.encode_raw(self.device.read(index, subindex))

    def set_data(self, index, subindex, data, check_writable=False):
        obj = self._find_object(index, subindex)
        if check_writable and not obj.writable:
            raise SdoAbortedError(READ_ONLY)
        if obj.data_type in cod.NUMBER_TYPES and 8 * len(data) != len(obj):
            raise SdoAbortedError(LENGTH_MISMATCH)
        self.device.write(index, subindex, obj.decode_raw(bytes(data)))


class _Pdo:
    """One valid PDO as configured: COB-ID, transmission type, timing, mapped objects."""

    def __init__(self, cob, trans, inhibit, event_timer, fields):
        self.cob, self.trans, self.fields = cob, trans, fields       # fields: [(index, subindex, ODVariable)]
        self.inhibit, self.event_timer = inhibit * 1e-4, event_timer * 1e-3   # s
        self.size = sum(len(v) for _i, _s, v in fields) // 8
        self.syncs = 0
        self.last_data = None
        self.last_tx = -1e9
        self.latched = None


class CanopenDevice:
    """The CiA 301 behaviour of one node; a device profile subclasses the application hooks (``live``,
    ``check_application``, ``on_written``, ``on_sync``, ``on_nmt``, ``on_reset``, ``on_heartbeat_lost``)."""

    def __init__(self, node_id: int, od, send, now: float):
        self.id = node_id
        self.od = od
        self._send = send                   # send(cob, bytes)
        self.node = _SdoNode(self, node_id, od)
        self.node.sdo.network = self        # the SDO server answers through send_message
        self.values: dict = {}
        self.nmt = INITIALISING
        self.now = now
        self.heartbeat_muted = False        # test hook: a node whose heartbeat is lost on the way
        self.log: list = []                 # [(time, event)]
        self.stats = {"pdo_length_errors": 0, "pdo_rejected": 0, "frames_ignored_in_state": 0}
        self._pdos = None
        self._consumer: dict = {}           # sub -> [node, time s, armed, last heartbeat time]
        self._next_heartbeat = None
        self._load_defaults(0x0000, 0xFFFF)
        self._boot(now)

    # -- object store ------------------------------------------------------------------------
    def _load_defaults(self, low: int, high: int) -> None:
        for obj in self.od.values():
            if not low <= obj.index <= high:
                continue
            members = obj.values() if not isinstance(obj, cod.ODVariable) else [obj]
            for var in members:
                value = var.default
                if var.index in range(ob.RPDO_COMM, ob.RPDO_COMM + 4) or \
                        var.index in range(ob.TPDO_COMM, ob.TPDO_COMM + 4):
                    if var.subindex == 1:
                        value = value + self.id   # the predefined connection set includes the node ID
                self.values[(var.index, var.subindex)] = value
        self._pdos = None
        self._consumer = {}

    def read(self, index: int, subindex: int):
        value = self.live(index, subindex)
        return self.values[(index, subindex)] if value is None else value

    def write(self, index: int, subindex: int, value) -> None:
        """A write by SDO or PDO: range, then CiA 301's and the profile's rules, then stored; aborts raise."""
        obj = self.node._find_object(index, subindex)
        if obj.min is not None and value < obj.min:
            raise SdoAbortedError(VALUE_TOO_LOW)
        if obj.max is not None and value > obj.max:
            raise SdoAbortedError(VALUE_TOO_HIGH)
        self._check_communication(index, subindex, value)
        self.check_application(index, subindex, value)
        self.values[(index, subindex)] = value
        if ob.RPDO_COMM <= index < ob.RPDO_MAP + 4 or ob.TPDO_COMM <= index < ob.TPDO_MAP + 4:
            self._pdos = None
        elif index == ob.CONSUMER_HEARTBEAT:
            self._consumer.pop(subindex, None)
        elif index == ob.HEARTBEAT_TIME:
            self._next_heartbeat = self.now + value / 1000.0 if value else None
        self.on_written(index, subindex, value)

    def _check_communication(self, index: int, subindex: int, value) -> None:
        if index == ob.CONSUMER_HEARTBEAT and subindex > 0:
            node, ms = value >> 16 & 0xFF, value & 0xFFFF
            for sub in range(1, self.values[(index, 0)] + 1):
                other = self.values[(index, sub)]
                if sub != subindex and node and ms and other >> 16 & 0xFF == node and other & 0xFFFF:
                    raise SdoAbortedError(INCOMPATIBLE)
        for com, mapping, rx in ((ob.RPDO_COMM, ob.RPDO_MAP, True), (ob.TPDO_COMM, ob.TPDO_MAP, False)):
            if com <= index < com + 4:
                self._check_pdo_communication(index, subindex, value, rx)
            elif mapping <= index < mapping + 4:
                self._check_pdo_mapping(index, subindex, value, com + index - mapping, rx)

    def _check_pdo_communication(self, index, subindex, value, rx) -> None:
        if subindex == 1:
            old = self.values[(index, 1)]
            if value & 0x20000000:                                    # 29-bit CAN-ID: not supported
                raise SdoAbortedError(VALUE_RANGE)
            if not old & 0x80000000 and not value & 0x80000000 and (old ^ value) & 0x1FFFFFFF:
                raise SdoAbortedError(VALUE_RANGE)                    # CAN-ID changed while the PDO is valid
        elif subindex == 2 and (241 <= value <= 253):                 # reserved (and RTR-only, not supported)
            raise SdoAbortedError(VALUE_RANGE)

    def _check_pdo_mapping(self, index, subindex, value, com_index, rx) -> None:
        if not self.values[(com_index, 1)] & 0x80000000:
            raise SdoAbortedError(DEVICE_STATE)                       # PDO valid: the mapping is frozen
        if subindex == 0:
            bits = 0
            for sub in range(1, value + 1):
                entry = self.values[(index, sub)]
                if not entry:
                    raise SdoAbortedError(CANNOT_MAP)
                bits += entry & 0xFF
            if bits > 64:
                raise SdoAbortedError(PDO_TOO_LONG)
            return
        if self.values[(index, 0)] != 0:
            raise SdoAbortedError(DEVICE_STATE)                       # sub-index 0 must be 0 while editing
        if value == 0:
            return
        target, sub, bits = value >> 16, value >> 8 & 0xFF, value & 0xFF
        try:
            var = self.node._find_object(target, sub)
        except SdoAbortedError:
            raise SdoAbortedError(CANNOT_MAP) from None
        if not var.pdo_mappable or len(var) != bits or not (var.writable if rx else var.readable):
            raise SdoAbortedError(CANNOT_MAP)

    # -- NMT -----------------------------------------------------------------------------------
    def _boot(self, now: float) -> None:
        self.nmt = INITIALISING
        self.send(0x700 + self.id, b"\x00")                           # boot-up
        self.log.append((now, "boot-up"))
        self._set_nmt(PRE_OPERATIONAL, now)
        period = self.values[(ob.HEARTBEAT_TIME, 0)]
        self._next_heartbeat = now + period / 1000.0 if period else None

    def _set_nmt(self, state: int, now: float) -> None:
        old, self.nmt = self.nmt, state
        if old == state:
            return
        self.log.append((now, NMT_NAMES[state]))
        self._pdos = None
        self.on_nmt(old, state, now)

    def nmt_command(self, data, now: float) -> None:
        if len(data) != 2 or data[1] not in (0, self.id):
            return
        cs = data[0]
        if cs == 0x01:
            self._set_nmt(OPERATIONAL, now)
        elif cs == 0x02:
            self._set_nmt(STOPPED, now)
        elif cs == 0x80:
            self._set_nmt(PRE_OPERATIONAL, now)
        elif cs in (0x81, 0x82):
            application = cs == 0x81
            self.on_reset(application, now)
            self._load_defaults(0x1000 if not application else 0x0000, 0x1FFF if not application else 0xFFFF)
            self._boot(now)

    # -- frames in -----------------------------------------------------------------------------
    def receive(self, cob: int, data, now: float) -> None:
        self.now = now
        if cob == 0x000:
            self.nmt_command(data, now)
        elif 0x701 <= cob <= 0x77F:
            self._heartbeat_in(cob - 0x700, data, now)
        elif self.nmt == STOPPED:
            if cob in (0x80, 0x600 + self.id):
                self.stats["frames_ignored_in_state"] += 1
        elif cob == 0x80:
            self.on_sync(now)
            if self.nmt == OPERATIONAL:
                self._pdo_sync(now)
        elif cob == 0x600 + self.id:
            self.node.sdo.on_request(cob, data, now)
        else:
            for pdo in self.pdos(rx=True):
                if pdo.cob == cob:
                    self._rpdo_in(pdo, bytes(data), now)

    def send_message(self, cob, data) -> None:       # canopen's SdoServer sends through this
        self.send(cob, bytes(data))

    def send(self, cob: int, data: bytes) -> None:
        self._send(cob, bytes(data))

    def emcy(self, code: int, register_bits: int = 0) -> None:
        """Raise (or with code 0 reset) an error: EMCY frame and the error register 0x1001."""
        register = 0 if code == 0 else self.values[(ob.ERROR_REGISTER, 0)] | register_bits | 0x01
        self.values[(ob.ERROR_REGISTER, 0)] = register
        if self.nmt in (PRE_OPERATIONAL, OPERATIONAL):
            self.send(0x80 + self.id, struct.pack("<HB5x", code, register))
        self.log.append((self.now, f"EMCY 0x{code:04X}"))

    # -- heartbeat -----------------------------------------------------------------------------
    def _heartbeat_in(self, node: int, data, now: float) -> None:
        if self.nmt == INITIALISING or not data:
            return
        for sub in range(1, self.values[(ob.CONSUMER_HEARTBEAT, 0)] + 1):
            entry = self.values[(ob.CONSUMER_HEARTBEAT, sub)]
            if entry >> 16 & 0xFF == node and entry & 0xFFFF:
                self._consumer[sub] = [node, (entry & 0xFFFF) / 1000.0, True, now]

    def tick(self, now: float) -> float:
        """Time-driven services (heartbeat producer and consumer, event-driven TPDOs); the next deadline."""
        self.now = now
        wake = now + 0.05
        if self._next_heartbeat is not None:
            if now >= self._next_heartbeat:
                if not self.heartbeat_muted:
                    self.send(0x700 + self.id, bytes([self.nmt]))
                period = self.values[(ob.HEARTBEAT_TIME, 0)] / 1000.0
                self._next_heartbeat = max(self._next_heartbeat + period, now)
            wake = min(wake, self._next_heartbeat)
        for sub, entry in list(self._consumer.items()):
            node, limit, armed, last = entry
            if armed and now - last > limit:
                entry[2] = False
                self.log.append((now, f"heartbeat of node {node} lost"))
                self.emcy(EMCY_HEARTBEAT, 0x10)
                behaviour = self.values[(ob.ERROR_BEHAVIOUR, 1)]
                if behaviour == 0 and self.nmt == OPERATIONAL:
                    self._set_nmt(PRE_OPERATIONAL, now)
                elif behaviour == 2:
                    self._set_nmt(STOPPED, now)
                self.on_heartbeat_lost(node, now)
            elif armed:
                wake = min(wake, last + limit + 1e-3)
        if self.nmt == OPERATIONAL:
            wake = min(wake, self._pdo_events(now))
        return wake

    # -- PDOs ----------------------------------------------------------------------------------
    def pdos(self, rx: bool):
        if self._pdos is None:
            self._pdos = {True: self._parse(ob.RPDO_COMM, ob.RPDO_MAP), False: self._parse(ob.TPDO_COMM, ob.TPDO_MAP)}
        return self._pdos[rx] if self.nmt == OPERATIONAL else ()

    def _parse(self, com0: int, map0: int) -> list:
        out = []
        for k in range(4):
            cob = self.values[(com0 + k, 1)]
            if cob & 0x80000000:
                continue
            fields = []
            for sub in range(1, self.values[(map0 + k, 0)] + 1):
                entry = self.values[(map0 + k, sub)]
                fields.append((entry >> 16, entry >> 8 & 0xFF, self.node._find_object(entry >> 16, entry >> 8 & 0xFF)))
            out.append(_Pdo(cob & 0x7FF, self.values[(com0 + k, 2)], self.values[(com0 + k, 3)],
                            self.values[(com0 + k, 5)], fields))
        return out

    def _pack(self, pdo: _Pdo) -> bytes:
        return b"".join(var.encode_raw(self.read(index, sub)) for index, sub, var in pdo.fields)

    def _transmit(self, pdo: _Pdo, data: bytes, now: float) -> None:
        pdo.last_data, pdo.last_tx = data, now
        self.transmit_pdo(pdo.cob, data)

    def transmit_pdo(self, cob: int, data: bytes) -> None:
        self.send(cob, data)

    def _pdo_sync(self, now: float) -> None:
        for pdo in self.pdos(rx=False):
            if pdo.trans == 0:
                data = self._pack(pdo)
                if data != pdo.last_data:
                    self._transmit(pdo, data, now)
            elif pdo.trans <= 240:
                pdo.syncs += 1
                if pdo.syncs >= pdo.trans:
                    pdo.syncs = 0
                    self._transmit(pdo, self._pack(pdo), now)
        for pdo in self.pdos(rx=True):
            if pdo.trans <= 240 and pdo.latched is not None:
                data, pdo.latched = pdo.latched, None
                self._apply_rpdo(pdo, data)

    def _pdo_events(self, now: float) -> float:
        wake = now + 0.05
        for pdo in self.pdos(rx=False):
            if pdo.trans < 254:
                continue
            data = self._pack(pdo)
            ready = now >= pdo.last_tx + pdo.inhibit
            if data != pdo.last_data and ready:
                self._transmit(pdo, data, now)
            elif pdo.event_timer and now >= pdo.last_tx + pdo.event_timer:
                self._transmit(pdo, data, now)
            elif data != pdo.last_data:
                wake = min(wake, pdo.last_tx + pdo.inhibit)
            if pdo.event_timer:
                wake = min(wake, pdo.last_tx + pdo.event_timer)
        return wake

    def _rpdo_in(self, pdo: _Pdo, data: bytes, now: float) -> None:
        if len(data) < pdo.size:
            self.stats["pdo_length_errors"] += 1
            self.emcy(EMCY_PDO_LENGTH, 0x10)
            return
        if pdo.trans <= 240:
            pdo.latched = data
        else:
            self._apply_rpdo(pdo, data)

    def _apply_rpdo(self, pdo: _Pdo, data: bytes) -> None:
        offset = 0
        for index, sub, var in pdo.fields:
            n = len(var) // 8
            try:
                self.write(index, sub, var.decode_raw(data[offset:offset + n]))
            except SdoAbortedError:
                self.stats["pdo_rejected"] += 1      # a PDO has no answer: the value is not taken
            offset += n

    # -- application hooks ---------------------------------------------------------------------
    def live(self, index: int, subindex: int):
        """The application's current value of a process object, or None (stored value)."""
        return None

    def check_application(self, index: int, subindex: int, value) -> None:
        """Raise SdoAbortedError to refuse a write the application cannot take."""

    def on_written(self, index: int, subindex: int, value) -> None:
        pass

    def on_sync(self, now: float) -> None:
        pass

    def on_nmt(self, old: int, new: int, now: float) -> None:
        pass

    def on_reset(self, application: bool, now: float) -> None:
        pass

    def on_heartbeat_lost(self, node: int, now: float) -> None:
        pass
