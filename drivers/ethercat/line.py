"""Bringing an EtherCAT line up with SOEM (pysoem) and telling what went wrong in one line.

The master opens a raw socket on the interface, scans the line (``config_init``: each slave's SII identity,
auto-increment then configured station addresses), maps the process data (``config_map``: FMMUs and sync
managers from the slaves' PDO assignment, read by CoE where a slave has it) and walks the AL state machine
INIT -> PRE-OP -> SAFE-OP -> OP (ETG.1000.6 AL control / status; a refused transition leaves the slave where it
was with the error indication and an AL status code, which :func:`al_status_name` names).
"""
from __future__ import annotations

import fcntl
import socket
import struct

STATE_NAMES = {0: "NONE", 1: "INIT", 2: "PRE-OP", 3: "BOOT", 4: "SAFE-OP", 8: "OP"}
ERROR_INDICATION = 0x10

# ETG.1000.6, table "AL status codes" (the ones a drive's bring-up meets; SOEM names the rest).
AL_STATUS_CODES = {
    0x0000: "no error", 0x0001: "unspecified error", 0x0011: "invalid requested state change",
    0x0012: "unknown requested state", 0x0013: "bootstrap not supported", 0x0014: "no valid firmware",
    0x0015: "invalid mailbox configuration (BOOT)", 0x0016: "invalid mailbox configuration (PRE-OP)",
    0x0017: "invalid sync manager configuration", 0x0018: "no valid inputs available",
    0x0019: "no valid outputs", 0x001A: "synchronization error", 0x001B: "sync manager watchdog",
    0x001C: "invalid sync manager types", 0x001D: "invalid output configuration",
    0x001E: "invalid input configuration", 0x001F: "invalid watchdog configuration",
    0x0020: "slave needs cold start", 0x0021: "slave needs INIT", 0x0022: "slave needs PRE-OP",
    0x0023: "slave needs SAFE-OP", 0x0024: "invalid input mapping", 0x0025: "invalid output mapping",
    0x0026: "inconsistent settings", 0x0027: "free run not supported", 0x0028: "sync mode not supported",
    0x002C: "fatal sync error", 0x002D: "no sync error", 0x0030: "invalid DC SYNC configuration",
    0x0031: "invalid DC latch configuration", 0x0032: "PLL error", 0x0033: "DC sync IO error",
    0x0034: "DC sync timeout error", 0x0035: "DC invalid sync cycle time", 0x0036: "DC SYNC0 cycle time",
    0x0037: "DC SYNC1 cycle time",
}


def state_name(state: int) -> str:
    name = STATE_NAMES.get(state & 0x0F, f"0x{state & 0x0F:X}")
    return name + (" + ERROR" if state & ERROR_INDICATION else "")


def al_status_name(code: int) -> str:
    return f"AL status code 0x{code:04X} ({AL_STATUS_CODES.get(code, 'vendor specific or unknown')})"


def sdo_abort_name(error) -> str:
    """A pysoem ``SdoError`` as one phrase: the object, the abort code and what it means (ETG.1000.6 5.6.2.7)."""
    desc = " ".join(str(getattr(error, "desc", "") or "").split())
    return (f"SDO abort 0x{error.abort_code:08X} ({desc or 'no description'}) on object "
            f"0x{error.index:04X}:{error.subindex:02X}")


def identity_line(slave) -> str:
    return (f"vendor id 0x{slave.man:08X}, product code 0x{slave.id:08X}, revision 0x{slave.rev:08X} "
            f"({slave.name!r})")


def states_line(master, positions) -> str:
    """Each configured slave not in OP: its state and AL status code (read now: bring-up or a fault, never
    the cycle)."""
    master.read_state()
    parts = []
    for k in positions:
        slave = master.slaves[k]
        if slave.state & 0x0F != 8 or slave.state & ERROR_INDICATION:
            parts.append(f"slave {k} in {state_name(slave.state)}, {al_status_name(slave.al_status)}")
    return "; ".join(parts) or "every slave in OP"


# SIOCGIFFLAGS (linux/sockios.h) and the flags of a link that carries frames (linux/if.h).
SIOCGIFFLAGS = 0x8913
IFF_UP, IFF_RUNNING = 0x1, 0x40


class LinkWatch:
    """The carrier of the master's interface, read without allocating (an ioctl into a buffer made once): a
    link that is down, or has no carrier (the cable out, the peer off), loses every frame at once."""

    def __init__(self, interface: str):
        self.interface = interface
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._request = bytearray(struct.pack("16sH22x", interface.encode()[:15], 0))
        self._flags = memoryview(self._request)[16:18]

    def up(self) -> bool:
        try:
            fcntl.ioctl(self._socket.fileno(), SIOCGIFFLAGS, self._request)
        except OSError:
            return False
        flags = self._flags[0] | self._flags[1] << 8
        return flags & (IFF_UP | IFF_RUNNING) == IFF_UP | IFF_RUNNING

    def close(self) -> None:
        self._socket.close()


def set_watchdog(slave, seconds: float, where: str, tries: int = 3) -> None:
    """The slave's SM watchdog time (0x0420, in units of the divider 0x0400) by register writes, each answered
    within SOEM's 4 ms or tried again (a busy line or host), else one line beginning with ``where``."""
    import warnings

    for attempt in range(tries):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")          # pysoem's note that the time is rounded to ticks
                slave.set_watchdog("processdata", seconds * 1e3)
            return
        except Exception as exc:  # noqa: BLE001  (pysoem's WkcError: no answer; AttributeError: too long)
            if isinstance(exc, AttributeError) or attempt == tries - 1:
                raise RuntimeError(f"{where}: setting its SM watchdog to {seconds:g} s failed: "
                                   f"{type(exc).__name__} {' '.join(str(exc).split())}".rstrip()) from None


SOEM_SYNC_DELAY = 0.1          # s: SOEM's dc_sync sets the start time this long after it reads the slave's clock
REG_SYSTEM_TIME, REG_ACTIVATION, REG_START_TIME = 0x0910, 0x0981, 0x0990
SYNC0_ACTIVE = 0x03            # 0x0981: cyclic operation and SYNC0


def sync0_state(slave) -> str | None:
    """Whether the slave's SYNC0 pulses, once the start time its activation was given has passed (ETG.1000.4
    distributed clocks; Beckhoff's ESC datasheets, section II, 0x0990 "read: system time of the next SYNC0
    pulse"): ``"running"`` with cyclic operation and SYNC0 activated in 0x0981 and the next pulse 0x0990, read
    after the system time 0x0910, later than it; ``"late"`` otherwise (a start time already past when the
    activation was written never comes: a 64-bit system time does not wrap, 0x0990 stays behind);
    ``"unanswered"`` when a read got no answer; None where pysoem offers no register read (its slaves'
    ``_fprd``, which its own watchdog and EEPROM tools use)."""
    import pysoem

    try:
        system = struct.unpack("<Q", slave._fprd(REG_SYSTEM_TIME, 8))[0]
        activation = slave._fprd(REG_ACTIVATION, 1)[0]
        next_pulse = struct.unpack("<Q", slave._fprd(REG_START_TIME, 8))[0]
    except AttributeError:
        return None
    except pysoem.WkcError:
        return "unanswered"
    return "running" if activation & SYNC0_ACTIVE == SYNC0_ACTIVE and next_pulse > system else "late"


def sdo(slave, where: str, index: int, subindex: int, fmt: str | None = None, data: bytes | None = None,
        optional: bool = False):
    """The slave's object by SDO (written with ``data``; read, unpacked by ``fmt``); None for an ``optional`` object
    the slave does not have (abort 0x06020000 or 0x06090011), any other failure one line beginning with
    ``where``. A mailbox that did not answer in SOEM's time (a busy line or host) is asked again, three times in
    all."""
    import pysoem

    try:
        for attempt in range(3):
            try:
                if data is not None:
                    return slave.sdo_write(index, subindex, data)
                raw = slave.sdo_read(index, subindex)
                return struct.unpack_from(fmt, raw)[0] if fmt else raw
            except pysoem.WkcError:
                if attempt == 2:
                    raise
    except pysoem.SdoError as exc:
        if optional and exc.abort_code in (0x06020000, 0x06090011):
            return None
        raise RuntimeError(f"{where}: {sdo_abort_name(exc)}") from None
    except Exception as exc:  # noqa: BLE001  (a mailbox timeout or error: pysoem's own exceptions)
        raise RuntimeError(f"{where}: SDO 0x{index:04X}:{subindex:02X} failed: {type(exc).__name__} "
                           f"{' '.join(str(exc).split()) or ''}".rstrip()) from None
