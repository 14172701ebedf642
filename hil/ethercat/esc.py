"""One emulated EtherCAT slave controller (ESC): its memory, the registers a master uses during bring-up, the
SII EEPROM interface, FMMUs, sync managers, the SM watchdog and the AL state machine.

Register map (ETG.1000.4, DL registers; ETG.1000.6, AL registers): 0x0000-0x0009 type, revision, build,
FMMUs / SMs supported, RAM size, port descriptor, features; 0x0010 configured station address, 0x0012
configured station alias; 0x0100-0x0103 DL control (0x0103 bit 0: alias addressing); 0x0110 DL status;
0x0120 AL control; 0x0130 AL status, 0x0134 AL status code; 0x0140 PDI control; 0x0400 watchdog divider,
0x0420 SM watchdog time, 0x0440 SM watchdog status; 0x0500-0x050F SII EEPROM interface; 0x0600 + 16n FMMU n;
0x0800 + 8n sync manager n; 0x0900-0x09FF distributed clocks (:mod:`.dc`); 0x1000 on process RAM.

The AL state machine (ETG.1000.6, AL control and status; AL status codes): INIT -> PRE-OP -> SAFE-OP -> OP
and back down to any lower state. A refused request leaves the state, sets the error indication (AL status
bit 4) and an AL status code: 0x0011 an invalid transition (INIT -> SAFE-OP, ...), 0x0012 an unknown state,
0x0013 bootstrap (not supported), 0x0016 the mailbox sync managers SM0 / SM1 not as the SII declares them
(INIT -> PRE-OP: enabled, start address, length, and the control byte's operation mode and direction, bits
0-3; its interrupt enables are the master's choice), 0x001D / 0x001E sync manager 2 / 3 not as the PDOs need
(PRE-OP -> SAFE-OP), 0x001B the SM watchdog expired in OP (the slave drops to SAFE-OP). While the error
indication is set the slave takes a request only with the acknowledge bit (AL control bit 4).
"""
from __future__ import annotations

import struct

from . import dc
from .coe import SERVICE_EMERGENCY, SERVICE_SDO_REQUEST, CoeServices, SdoServer, coe_header
from .dictionary import TIMESTAMP, ObjectDictionary
from .frame import Command
from .mailbox import MAILBOX_HEADER, TYPE_COE, Mailbox
from .sdo_info import SERVICE_SDO_INFORMATION, SdoInformation
from .sii import SiiLayout

INIT, PREOP, BOOT, SAFEOP, OP = 1, 2, 3, 4, 8
STATE_NAMES = {INIT: "INIT", PREOP: "PRE-OP", BOOT: "BOOT", SAFEOP: "SAFE-OP", OP: "OP"}
ERROR_INDICATION = 0x10

AL_NO_ERROR = 0x0000
AL_INVALID_STATE_CHANGE = 0x0011
AL_UNKNOWN_STATE = 0x0012
AL_BOOTSTRAP_NOT_SUPPORTED = 0x0013
AL_INVALID_MAILBOX_CONFIGURATION = 0x0016
AL_SM_WATCHDOG = 0x001B
AL_INVALID_OUTPUT_CONFIGURATION = 0x001D
AL_INVALID_INPUT_CONFIGURATION = 0x001E

REG_TYPE, REG_STATION, REG_ALIAS = 0x0000, 0x0010, 0x0012
REG_DL_CONTROL_ALIAS = 0x0103
REG_DL_STATUS = 0x0110
REG_AL_CONTROL, REG_AL_STATUS, REG_AL_STATUS_CODE = 0x0120, 0x0130, 0x0134
REG_PDI_CONTROL = 0x0140
REG_WD_DIVIDER, REG_WD_SM_TIME, REG_WD_SM_STATUS = 0x0400, 0x0420, 0x0440
REG_EEP_CONTROL, REG_EEP_ADDRESS, REG_EEP_DATA = 0x0502, 0x0504, 0x0508
REG_FMMU, FMMU_SIZE, FMMUS = 0x0600, 16, 8
REG_SM, SM_SIZE, SYNC_MANAGERS = 0x0800, 8, 8

MEMORY = 0x10000
ESC_TYPE = 0x90                      # not a Beckhoff part number: an emulated ESC
EEP_READ, EEP_WRITE, EEP_RELOAD = 0x0100, 0x0200, 0x0400
EEP_READ_8_BYTES = 0x0040            # EEPROM status: a read returns 8 bytes (SOEM's "R64")
EEP_ACK_ERROR = 0x2000
_TICKS_NS = 40                       # the watchdog divider counts 25 MHz clocks

# Bytes the master may write (ETG.1000.4 register access; the rest is read-only and keeps its value).
_WRITABLE = ((0x0010, 0x0014), (0x0100, 0x0104), (0x0120, 0x0122), (0x0200, 0x0204), (0x0300, 0x0314),
             (0x0400, 0x0402), (0x0410, 0x0412), (0x0420, 0x0422), (0x0500, 0x0501), (0x0502, 0x0510),
             (0x0600, 0x0700), (0x0800, 0x0880), *dc.WRITABLE, (0x1000, MEMORY))
_WRITABLE_MASK = bytearray(MEMORY)
for _lo, _hi in _WRITABLE:
    _WRITABLE_MASK[_lo:_hi] = b"\x01" * (_hi - _lo)
for _n in range(SYNC_MANAGERS):                      # a sync manager's status and PDI control: the ESC's own
    _WRITABLE_MASK[REG_SM + _n * SM_SIZE + 5] = _WRITABLE_MASK[REG_SM + _n * SM_SIZE + 7] = 0


class Fmmu:
    """An FMMU's registers (16 bytes at 0x0600 + 16n): logical start, length, start / end bit, physical
    start and start bit, type (bit 0 read, bit 1 write) and activation."""
    __slots__ = ("logical", "length", "start_bit", "end_bit", "physical", "physical_bit", "kind", "active")

    def __init__(self, raw: bytes):
        (self.logical, self.length, self.start_bit, self.end_bit, self.physical, self.physical_bit,
         self.kind, self.active) = struct.unpack_from("<IHBBHBBB", raw)


class Esc:
    """One slave: ``position`` in the chain (0 first), ``last`` for the end of the line (port 1 closed),
    the SII ``layout``, and ``application``: the slave's side of the PDI, called after each frame (see
    :class:`.chain.LoopbackAxis`)."""

    def __init__(self, position: int, last: bool, layout: SiiLayout, application, now: float = 0.0,
                 drift_ppm: float = 0.0):
        self.position = position
        self.layout = layout
        self.application = application
        self.sii = bytearray(layout.image())
        self.memory = bytearray(MEMORY)
        m = self.memory
        m[REG_TYPE:REG_TYPE + 10] = struct.pack("<BBHBBHBBH", ESC_TYPE, 1, 1, FMMUS, SYNC_MANAGERS, 8, 0x0F, 0, 0)
        m[0x0006] = 8                                      # RAM size, KiB
        m[0x0007] = 0x0F                                   # port descriptor: ports 0, 1 MII
        struct.pack_into("<H", m, 0x0008, dc.FEATURES)     # features: distributed clocks, 64-bit
        struct.pack_into("<H", m, REG_ALIAS, layout.station_alias)
        struct.pack_into("<H", m, REG_DL_STATUS, dl_status(last))
        struct.pack_into("<H", m, REG_PDI_CONTROL, 0x0005)  # SPI PDI (any non-zero: a PDI is present)
        struct.pack_into("<H", m, REG_WD_DIVIDER, 2498)     # (2498 + 2) x 40 ns = 100 us
        struct.pack_into("<H", m, REG_WD_SM_TIME, 1000)     # 1000 x 100 us = 100 ms
        struct.pack_into("<H", m, REG_EEP_CONTROL, EEP_READ_8_BYTES)
        self.now = now                     # the chain's time of the frame being processed
        self.clock = dc.DistributedClock(m, position, now, drift_ppm)
        self.dictionary = ObjectDictionary(layout, device=getattr(application, "device", None),
                                           clock=lambda: self.now)
        self.dictionary.on_fault_request = lambda code: application.fault(code, self.now)
        mailbox = layout.mailbox()
        mailbox_data = (mailbox[0].length if mailbox else 0) - MAILBOX_HEADER.size
        self.sdo = SdoServer(self.dictionary, mailbox_data)
        coe = CoeServices({SERVICE_SDO_REQUEST: self.sdo,
                           SERVICE_SDO_INFORMATION: SdoInformation(self.dictionary, mailbox_data)})
        self.mailbox = Mailbox(self.memory, {TYPE_COE: coe}) if mailbox else None
        self.state = INIT
        self._in_op = False                   # OP at the PDI's last turn: leaving it is the application's event
        self._outputs_in_op = False           # outputs unpacked since the slave last entered OP
        self.status_code = AL_NO_ERROR
        self.error = False
        self._publish_al_status()
        self.outputs_fresh = False         # written through an FMMU since the PDI last took them
        self.last_output_write = now
        self.watchdog_expiries = 0
        self.refusals = 0
        self.emergencies = 0
        self.refuse_op_code = AL_NO_ERROR   # a fault on request: SAFE-OP -> OP refused with this code

    # -- addressing -------------------------------------------------------------------------------------------

    def matches_configured(self, adp: int) -> bool:
        m = self.memory
        if m[REG_DL_CONTROL_ALIAS] & 0x01 and adp == struct.unpack_from("<H", m, REG_ALIAS)[0]:
            return True
        return adp == struct.unpack_from("<H", m, REG_STATION)[0]

    # -- physical memory ---------------------------------------------------------------------------------------

    def read(self, ado: int, n: int) -> bytes:
        end = min(ado + n, MEMORY)
        if ado < 0x0A00 and end > 0x0900:
            self.clock.before_read(ado, end, self.now)
        data = bytes(self.memory[ado:end]) + bytes(n - (end - ado))
        if self.mailbox:
            self.mailbox.read_done(ado, end)
        return data

    def refuses(self, ado: int, n: int, write: bool) -> bool:
        """True for an access the ESC does not take (no working counter): a mailbox sync manager's, see
        :meth:`.mailbox.Mailbox.refuses`."""
        return bool(self.mailbox) and self.mailbox.refuses(ado, n, write)

    def write(self, ado: int, data: bytes) -> None:
        """The master's write of ``data`` at ``ado``: read-only bytes keep their value, then the registers
        written act (AL control, EEPROM command)."""
        m, mask = self.memory, _WRITABLE_MASK
        end = min(ado + len(data), MEMORY)
        for k in range(end - ado):
            if mask[ado + k]:
                m[ado + k] = data[k]
        if ado <= REG_AL_CONTROL < end:
            self._al_request(m[REG_AL_CONTROL])
        if ado <= REG_EEP_CONTROL + 1 < end:
            self._eeprom_command()
        if ado < 0x0A00 and end > 0x0900:
            self.clock.after_write(ado, data[:end - ado], self.now)
        if self.mailbox:
            self.mailbox.written(ado, end)

    def read_write(self, ado: int, data: bytes) -> bytes:
        old = self.read(ado, len(data))
        self.write(ado, data)
        return old

    # -- logical addressing through the FMMUs ----------------------------------------------------------------

    def fmmus(self):
        m = self.memory
        for n in range(FMMUS):
            base = REG_FMMU + n * FMMU_SIZE
            if m[base + 12] & 0x01:
                yield Fmmu(m[base:base + FMMU_SIZE])

    def logical(self, command: int, address: int, frame: memoryview, now: float) -> int:
        """Process a logical datagram (``frame``: its data, changed in place); the working counter increment:
        +1 if an FMMU read, for LRW +2 if an FMMU wrote (+3 both), for LWR +1 if one wrote (ETG.1000.4,
        logical read / write / read-write and the working counter)."""
        incoming = bytes(frame) if command == Command.LRW else frame
        did_read = did_write = False
        writes = []
        stopped = self._stopped_process_data()
        for f in self.fmmus():
            if any(start <= f.physical < start + length for start, length in stopped):
                continue
            lo = max(address, f.logical)
            hi = min(address + len(frame), f.logical + f.length)
            if lo >= hi:
                continue
            if f.kind & 0x01 and command in (Command.LRD, Command.LRW):
                self._copy_bits(f, lo, hi, address, frame, to_frame=True)
                did_read = True
            if f.kind & 0x02 and command in (Command.LWR, Command.LRW):
                writes.append((f, lo, hi))
        for f, lo, hi in writes:
            self._copy_bits(f, lo, hi, address, incoming, to_frame=False)
            did_write = True
            self.last_output_write = now
            self.outputs_fresh = True
        if did_write:
            self.clock.outputs_written(now)
        if command == Command.LRW:
            return did_read + 2 * did_write
        return int(did_read or did_write)

    def _copy_bits(self, f: Fmmu, lo: int, hi: int, address: int, frame, to_frame: bool) -> None:
        """Copy the bytes ``lo..hi`` (logical) between the frame and memory; bit-wise at the FMMU's first and
        last logical byte when its start / end bit or physical start bit are not whole bytes."""
        m = self.memory
        offset = f.physical - f.logical
        if f.start_bit == 0 and f.end_bit == 7 and f.physical_bit == 0:
            p = lo + offset
            if to_frame:
                frame[lo - address:hi - address] = m[p:p + hi - lo]
            else:
                m[p:p + hi - lo] = frame[lo - address:hi - address]
            return
        first = f.logical * 8 + f.start_bit
        last = (f.logical + f.length - 1) * 8 + f.end_bit
        for bit in range(max(lo * 8, first), min(hi * 8 - 1, last) + 1):
            pbit = f.physical * 8 + f.physical_bit + bit - first
            fb, pb = bit - address * 8, pbit
            if to_frame:
                value = m[pb >> 3] >> (pb & 7) & 1
                frame[fb >> 3] = (frame[fb >> 3] & ~(1 << (fb & 7))) | value << (fb & 7)
            else:
                value = frame[fb >> 3] >> (fb & 7) & 1
                m[pb >> 3] = (m[pb >> 3] & ~(1 << (pb & 7))) | value << (pb & 7)

    # -- sync managers and the PDI side -----------------------------------------------------------------------

    def sync_manager(self, n: int) -> tuple[int, int, int, int]:
        """Start, length, control byte and activate byte of sync manager ``n``."""
        start, length, control, _status, activate = struct.unpack_from("<HHBBB", self.memory, REG_SM + n * SM_SIZE)
        return start, length, control, activate

    def _stopped_process_data(self) -> list[tuple[int, int]]:
        """The process data sync managers' areas while they do not run: below SAFE-OP the slave keeps them
        disabled (ETG.1000.6, AL states), so an FMMU onto them moves nothing and counts nothing."""
        if self.state in (SAFEOP, OP):
            return []
        return [self.sync_manager(n)[:2] for n in self._pdo_sync_managers()]

    def _sm_area(self, n: int) -> tuple[int, int]:
        start, length, _, activate = self.sync_manager(n)
        return (start, length) if activate & 0x01 else (0, 0)

    def synchronise(self, now: float) -> None:
        """DC synchronous (ETG.1020, ETG.6010; SYNC0 running, in OP): at the SYNC0 pulses since the last taken,
        the application takes the outputs written before them -- at the first of them, and again at the latest,
        the plant's time -- and latches its inputs at the latest (their timestamp 0x10F8 the pulse's system
        time). Each frame's datagrams come after it (:meth:`.chain.EscChain.process`): a frame reads the inputs
        of the pulse before it and its outputs wait for the next."""
        pulses = self.clock.pulses_since_taken(now) if self.state == OP else None
        if pulses is None:
            return
        first, latest = pulses
        out_sm, in_sm = self._pdo_sync_managers()
        if self._sm_area(out_sm)[1] and self._outputs_in_op:
            self.application.outputs(self.state, self.dictionary, first)
            if latest != first:
                self.application.outputs(self.state, self.dictionary, latest)
        self._latch_inputs(in_sm, latest, self.clock.taken)

    def _latch_inputs(self, in_sm: int, now: float, stamp: int) -> None:
        start, length = self._sm_area(in_sm)
        if length:
            self.application.inputs(self.state, self.dictionary, now)
            self.dictionary.set_value(TIMESTAMP, 0, stamp)
            self.memory[start:start + length] = self.dictionary.pack(in_sm)[:length].ljust(length, b"\0")

    def exchange(self, now: float) -> None:
        """The PDI's turn after a frame: outputs written since its last turn into the objects they map and to
        the application in OP (a buffered sync manager hands over a buffer once written), its inputs written to
        the objects and from them to SM3 in SAFE-OP and OP (ETG.1000.6 5.6.7); the SM watchdog checked (it
        expires in OP without an output write for its time). With SYNC0 running, in OP the application takes
        its outputs and latches its inputs at the pulses instead (:meth:`synchronise`, also here: between
        frames)."""
        self.synchronise(now)
        out_sm, in_sm = self._pdo_sync_managers()
        fresh, self.outputs_fresh = self.outputs_fresh, False
        synchronous = self.state == OP and self.clock.synchronous
        if self.state == OP:
            start, length = self._sm_area(out_sm)
            if length and fresh:
                self.dictionary.unpack(out_sm, self.memory[start:start + length])
                self._outputs_in_op = True
                if not synchronous:
                    self.application.outputs(self.state, self.dictionary, now)
            if self._watchdog_expired(now):
                self.watchdog_expiries += 1
                self._refuse_or_drop(SAFEOP, AL_SM_WATCHDOG)
        for message in self.application.emergencies():
            self.dictionary.set_value(0x1001, 0, message[2])
            if self.mailbox and self.mailbox.active:
                self.mailbox.send(TYPE_COE, coe_header(SERVICE_EMERGENCY) + message)
                self.emergencies += 1
        if self.state in (SAFEOP, OP) and not synchronous:
            self._latch_inputs(in_sm, now, self.clock.system_ns(now))
        if self._in_op and self.state != OP:
            self.application.left_op(self.state, now)
        if self.state != OP:
            self._outputs_in_op = False
            self.clock.taken = None
        self._in_op = self.state == OP

    def _watchdog_expired(self, now: float) -> bool:
        ticks = struct.unpack_from("<H", self.memory, REG_WD_SM_TIME)[0]
        divider = struct.unpack_from("<H", self.memory, REG_WD_DIVIDER)[0]
        control = self.sync_manager(self._pdo_sync_managers()[0])[2]
        if not ticks or not control & 0x40:
            struct.pack_into("<H", self.memory, REG_WD_SM_STATUS, 1)
            return False
        expired = now - self.last_output_write > ticks * (divider + 2) * _TICKS_NS * 1e-9
        struct.pack_into("<H", self.memory, REG_WD_SM_STATUS, 0 if expired else 1)
        return expired

    def _pdo_sync_managers(self) -> tuple[int, int]:
        return self.layout.rx_pdos[0].sync_manager, self.layout.tx_pdos[0].sync_manager

    def _process_data_ok(self) -> int:
        """AL_NO_ERROR if SM2 / SM3 are enabled at the lengths of the PDOs assigned (0x1C12 / 0x1C13), else the
        status code naming which not."""
        out_sm, in_sm = self._pdo_sync_managers()
        for n, code in ((out_sm, AL_INVALID_OUTPUT_CONFIGURATION), (in_sm, AL_INVALID_INPUT_CONFIGURATION)):
            declared = self.layout.sync_managers[n]
            start, length, _, activate = self.sync_manager(n)
            need = self.dictionary.mapped_bytes(n)
            if need and (not activate & 0x01 or length != need or start != declared.start):
                return code
        return AL_NO_ERROR

    def _mailbox_ok(self) -> int:
        """AL_NO_ERROR if SM0 / SM1 are enabled where, as long as and in the mode and direction the SII's mailbox
        says (ETG.1000.4 sync manager registers; ETG.2010 the SII's mailbox words and category 41), else
        0x0016."""
        for n, declared in enumerate(self.layout.mailbox() or ()):
            start, length, control, activate = self.sync_manager(n)
            if not activate & 0x01 or (start, length, control & 0x0F) != (declared.start, declared.length,
                                                                          declared.control & 0x0F):
                return AL_INVALID_MAILBOX_CONFIGURATION
        return AL_NO_ERROR

    # -- AL state machine -------------------------------------------------------------------------------------

    def _al_request(self, control: int) -> None:
        requested, acknowledge = control & 0x0F, bool(control & ERROR_INDICATION)
        if self.error and not acknowledge:
            return
        if acknowledge:
            self.error, self.status_code = False, AL_NO_ERROR
        if requested not in STATE_NAMES:
            self._refuse_or_drop(self.state, AL_UNKNOWN_STATE)
        elif requested == BOOT:
            self._refuse_or_drop(self.state, AL_BOOTSTRAP_NOT_SUPPORTED)
        elif requested <= self.state or requested == INIT:
            self.state = requested                            # down (or stay) is always allowed
        elif (self.state, requested) in ((INIT, PREOP), (PREOP, SAFEOP), (SAFEOP, OP)):
            code = self._process_data_ok() if requested == SAFEOP else \
                self._mailbox_ok() if requested == PREOP else AL_NO_ERROR
            if requested == OP and self.refuse_op_code:
                code = self.refuse_op_code
            if code:
                self._refuse_or_drop(self.state, code)
            else:
                self.state = requested
                if requested == OP:
                    self.last_output_write = self.now
        else:
            self._refuse_or_drop(self.state, AL_INVALID_STATE_CHANGE)
        self._publish_al_status()

    def _refuse_or_drop(self, state: int, code: int) -> None:
        self.state, self.error, self.status_code = state, True, code
        self.refusals += 1
        self._publish_al_status()

    def _publish_al_status(self) -> None:
        m = self.memory
        struct.pack_into("<H", m, REG_AL_STATUS, self.state | (ERROR_INDICATION if self.error else 0))
        struct.pack_into("<H", m, REG_AL_STATUS_CODE, self.status_code)
        self.dictionary.state = self.state
        if self.mailbox:
            self.mailbox.set_active(self.state in (PREOP, SAFEOP, OP))

    # -- SII EEPROM interface ---------------------------------------------------------------------------------

    def _eeprom_command(self) -> None:
        """Execute the command written to 0x0502 (ETG.1000.4, SII EEPROM interface): a read fills 0x0508
        with 8 bytes from the word address at 0x0504; a write stores the word at 0x0508. It completes at once
        (never busy); an address beyond the EEPROM answers with the acknowledge-error bit."""
        m = self.memory
        command = struct.unpack_from("<H", m, REG_EEP_CONTROL)[0] & 0x0700
        word = struct.unpack_from("<I", m, REG_EEP_ADDRESS)[0]
        status = EEP_READ_8_BYTES
        if command == EEP_READ:
            if word * 2 < len(self.sii):
                m[REG_EEP_DATA:REG_EEP_DATA + 8] = self.sii[word * 2:word * 2 + 8].ljust(8, b"\xff")
            else:
                status |= EEP_ACK_ERROR
        elif command == EEP_WRITE:
            if word * 2 < len(self.sii):
                self.sii[word * 2:word * 2 + 2] = m[REG_EEP_DATA:REG_EEP_DATA + 2]
            else:
                status |= EEP_ACK_ERROR
        struct.pack_into("<H", m, REG_EEP_CONTROL, status)

    def summary(self) -> dict:
        return {"position": self.position, "station": struct.unpack_from("<H", self.memory, REG_STATION)[0],
                "state": STATE_NAMES.get(self.state, hex(self.state)), "error": self.error,
                "al_status_code": self.status_code, "refusals": self.refusals,
                "watchdog_expiries": self.watchdog_expiries, "sdo": dict(self.sdo.transfers),
                "emergencies": self.emergencies, "dc": self.clock.summary(),
                "mailbox": self.mailbox.summary() if self.mailbox else {}}


def dl_status(last: bool) -> int:
    """DL status (0x0110): PDI operational (bit 0), link on ports 0 and 1 (bits 4, 5), port 0 open with
    communication (bit 9); port 1 open with communication (bit 11) unless the slave ends the line, where
    port 1 is closed (loop, bit 10). A master reads the topology from these bits."""
    return 0x0001 | 0x0010 | 0x0200 | (0x0400 if last else 0x0020 | 0x0800)
