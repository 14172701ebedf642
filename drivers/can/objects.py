"""The CANopen objects of a CiA 402 drive as this package uses them, and the drive's object dictionary.

Indices and value ranges follow CiA 301 (communication profile) and CiA 402-2 (drive profile,
objects 0x6007-0x6502). :func:`drive_object_dictionary` is the dictionary of the drive that
:mod:`rtctl.hil.cia402_drive` emulates, and the master's view of it; a lab passes the drive's own EDS
instead (``object_dictionary="drive.eds"``). Each object carries its access type, default, value range
(``min``/``max``, which a conforming device enforces with the SDO abort codes 0x06090031/0x06090032)
and whether it may be mapped into a PDO.
"""
from __future__ import annotations

from canopen import objectdictionary as cod

# Communication profile (CiA 301).
DEVICE_TYPE, ERROR_REGISTER, SYNC_COB_ID = 0x1000, 0x1001, 0x1005
CONSUMER_HEARTBEAT, HEARTBEAT_TIME, IDENTITY, ERROR_BEHAVIOUR = 0x1016, 0x1017, 0x1018, 0x1029
RPDO_COMM, RPDO_MAP, TPDO_COMM, TPDO_MAP = 0x1400, 0x1600, 0x1800, 0x1A00
# Drive profile (CiA 402).
ABORT_CONNECTION, ERROR_CODE, CONTROLWORD, STATUSWORD = 0x6007, 0x603F, 0x6040, 0x6041
QUICK_STOP_OPTION, FAULT_REACTION_OPTION = 0x605A, 0x605E
MODES_OF_OPERATION, MODES_DISPLAY, SUPPORTED_MODES = 0x6060, 0x6061, 0x6502
POSITION_ACTUAL, VELOCITY_ACTUAL, TORQUE_ACTUAL = 0x6064, 0x606C, 0x6077
TARGET_TORQUE, MAX_TORQUE, RATED_TORQUE, ENCODER_RESOLUTION = 0x6071, 0x6072, 0x6076, 0x608F
TARGET_POSITION, SOFTWARE_POSITION_LIMIT, TARGET_VELOCITY = 0x607A, 0x607D, 0x60FF
GEAR_RATIO = 0x6091       # factor group: sub 1 motor revolutions, sub 2 shaft revolutions
PROFILE_DECELERATION, QUICK_STOP_DECELERATION = 0x6084, 0x6085
TORQUE_OFFSET = 0x60B2    # per mille of the rated torque, added to the drive's own in CSP, CSV and CST
FAULT_INJECTION = 0x2001  # manufacturer specific (emulator): write an error code to enter FAULT
# Modes of operation (0x6060) and their bits in the supported drive modes (0x6502).
CSP, CSV, CST = 8, 9, 10
SUPPORTED_MODE_BIT = {CSP: 1 << 7, CSV: 1 << 8, CST: 1 << 9}
SUPPORTED_CST_BIT = SUPPORTED_MODE_BIT[CST]
# Power-stage peak the emulated drive allows for 0x6072 (per mille of the rated torque).
PEAK_TORQUE_PERMILLE = 5000

U8, U16, U32 = cod.UNSIGNED8, cod.UNSIGNED16, cod.UNSIGNED32
I8, I16, I32 = cod.INTEGER8, cod.INTEGER16, cod.INTEGER32


def _var(index, subindex, name, dtype, access="rw", default=0, parent=None, low=None, high=None, pdo=False):
    v = cod.ODVariable(name, index, subindex)
    v.data_type, v.access_type, v.default = dtype, access, default
    v.parent, v.min, v.max, v.pdo_mappable = parent, low, high, pdo
    return v


def _record(od, index, name, members):
    """``members``: (subindex, name, dtype, access, default, low, high). A record even where CiA 301 says
    ARRAY: the sub-indices that exist are exactly the listed ones (no templated members)."""
    rec = cod.ODRecord(name, index)
    for sub, sub_name, dtype, access, default, low, high in members:
        rec.add_member(_var(index, sub, sub_name, dtype, access, default, rec, low, high))
    od.add_object(rec)


def _pdo_objects(od) -> None:
    """PDO communication and mapping parameters, predefined connection set as defaults (node ID added by the
    device): RPDO1 = controlword, TPDO1 = statusword, both synchronous; PDOs 2-4 not valid."""
    for k in range(4):
        for com_index, map_index, base, kind, default_map in (
                (RPDO_COMM + k, RPDO_MAP + k, 0x200, "RPDO", [(CONTROLWORD, 0, 16)] if k == 0 else []),
                (TPDO_COMM + k, TPDO_MAP + k, 0x180, "TPDO", [(STATUSWORD, 0, 16)] if k == 0 else [])):
            cob = (base + 0x100 * k) | (0x80000000 if k else 0)
            subs = [(1, "COB-ID", U32, "rw", cob, None, None),
                    (2, "Transmission type", U8, "rw", 1 if k == 0 else 255, None, None),
                    (3, "Inhibit time", U16, "rw", 0, None, None),
                    (5, "Event timer", U16, "rw", 0, None, None)]
            if kind == "TPDO":
                subs.append((6, "SYNC start value", U8, "rw", 0, None, 240))
            _record(od, com_index, f"{kind}{k + 1} communication parameter",
                    [(0, "Highest sub-index supported", U8, "ro", subs[-1][0], None, None)] + subs)
            entries = [(0, "Number of mapped objects", U8, "rw", len(default_map), 0, 8)]
            for sub in range(1, 9):
                value = 0
                if sub <= len(default_map):
                    i, s, bits = default_map[sub - 1]
                    value = i << 16 | s << 8 | bits
                entries.append((sub, f"Mapped object {sub}", U32, "rw", value, None, None))
            _record(od, map_index, f"{kind}{k + 1} mapping parameter", entries)


def drive_object_dictionary(rated_torque_mnm: int = 1000, max_torque_permille: int = 3000,
                            increments_per_rev: int = 1 << 17, gear=(1, 1)) -> cod.ObjectDictionary:
    """The object dictionary of the emulated CiA 402 drive (CSP, CSV, CST); ``gear``: its gear ratio 0x6091 as
    (motor revolutions, shaft revolutions). The emulated gearbox is fixed, so 0x6091 is read-only here (CiA
    402-2 lists it read-write, for drives that scale their user units by it; this one reports motor units)."""
    od = cod.ObjectDictionary()
    add = od.add_object
    add(_var(DEVICE_TYPE, 0, "Device type", U32, "ro", 0x00020192))
    add(_var(ERROR_REGISTER, 0, "Error register", U8, "ro", 0, pdo=True))
    add(_var(SYNC_COB_ID, 0, "COB-ID SYNC", U32, "ro", 0x80))
    _record(od, CONSUMER_HEARTBEAT, "Consumer heartbeat time",
            [(0, "Highest sub-index supported", U8, "ro", 2, None, None),
             (1, "Consumer heartbeat time 1", U32, "rw", 0, 0, 0x00FFFFFF),
             (2, "Consumer heartbeat time 2", U32, "rw", 0, 0, 0x00FFFFFF)])
    add(_var(HEARTBEAT_TIME, 0, "Producer heartbeat time", U16, "rw", 0))
    _record(od, IDENTITY, "Identity object",
            [(0, "Highest sub-index supported", U8, "ro", 4, None, None), (1, "Vendor-ID", U32, "ro", 0, None, None),
             (2, "Product code", U32, "ro", 402, None, None), (3, "Revision number", U32, "ro", 1, None, None),
             (4, "Serial number", U32, "ro", 1, None, None)])
    _record(od, ERROR_BEHAVIOUR, "Error behaviour",
            [(0, "Highest sub-index supported", U8, "ro", 1, None, None),
             (1, "Communication error", U8, "rw", 0, 0, 2)])
    _pdo_objects(od)
    add(_var(FAULT_INJECTION, 0, "Inject fault (error code)", U16, "rw", 0))
    add(_var(ABORT_CONNECTION, 0, "Abort connection option code", I16, "rw", 1, low=0, high=3))
    add(_var(ERROR_CODE, 0, "Error code", U16, "ro", 0, pdo=True))
    add(_var(CONTROLWORD, 0, "Controlword", U16, "rw", 0, pdo=True))
    add(_var(STATUSWORD, 0, "Statusword", U16, "ro", 0, pdo=True))
    add(_var(QUICK_STOP_OPTION, 0, "Quick stop option code", I16, "rw", 2, low=0, high=8))
    add(_var(FAULT_REACTION_OPTION, 0, "Fault reaction option code", I16, "rw", 2, low=0, high=4))
    add(_var(MODES_OF_OPERATION, 0, "Modes of operation", I8, "rw", 0, pdo=True))
    add(_var(MODES_DISPLAY, 0, "Modes of operation display", I8, "ro", 0, pdo=True))
    add(_var(POSITION_ACTUAL, 0, "Position actual value", I32, "ro", 0, pdo=True))
    add(_var(VELOCITY_ACTUAL, 0, "Velocity actual value", I32, "ro", 0, pdo=True))
    add(_var(TARGET_TORQUE, 0, "Target torque", I16, "rw", 0, pdo=True))
    add(_var(MAX_TORQUE, 0, "Max torque", U16, "rw", max_torque_permille, low=0, high=PEAK_TORQUE_PERMILLE,
             pdo=True))
    add(_var(RATED_TORQUE, 0, "Motor rated torque", U32, "ro", rated_torque_mnm))
    add(_var(TORQUE_ACTUAL, 0, "Torque actual value", I16, "ro", 0, pdo=True))
    add(_var(TARGET_POSITION, 0, "Target position", I32, "rw", 0, pdo=True))
    _record(od, SOFTWARE_POSITION_LIMIT, "Software position limit",
            [(0, "Highest sub-index supported", U8, "ro", 2, None, None),
             (1, "Min position limit", I32, "rw", -(1 << 31), None, None),
             (2, "Max position limit", I32, "rw", (1 << 31) - 1, None, None)])
    add(_var(PROFILE_DECELERATION, 0, "Profile deceleration", U32, "rw", 10 * increments_per_rev, low=1))
    add(_var(QUICK_STOP_DECELERATION, 0, "Quick stop deceleration", U32, "rw", 50 * increments_per_rev, low=1))
    _record(od, ENCODER_RESOLUTION, "Position encoder resolution",
            [(0, "Highest sub-index supported", U8, "ro", 2, None, None),
             (1, "Encoder increments", U32, "ro", increments_per_rev, None, None),
             (2, "Motor revolutions", U32, "ro", 1, None, None)])
    _record(od, GEAR_RATIO, "Gear ratio",
            [(0, "Highest sub-index supported", U8, "ro", 2, None, None),
             (1, "Motor revolutions", U32, "ro", int(gear[0]), None, None),
             (2, "Shaft revolutions", U32, "ro", int(gear[1]), None, None)])
    add(_var(TARGET_VELOCITY, 0, "Target velocity", I32, "rw", 0, pdo=True))
    add(_var(TORQUE_OFFSET, 0, "Torque offset", I16, "rw", 0, pdo=True))
    add(_var(SUPPORTED_MODES, 0, "Supported drive modes", U32, "ro", sum(SUPPORTED_MODE_BIT.values())))
    return od


def declared_gear_ratio(sdo) -> tuple[int, int] | None:
    """The drive's gear ratio 0x6091 (motor revolutions, shaft revolutions) by SDO; None when its dictionary or
    the drive has no such object (optional in CiA 402-2; abort 0x06020000 / 0x06090011)."""
    from canopen.sdo import SdoAbortedError

    if GEAR_RATIO not in sdo.od:
        return None
    try:
        return sdo[GEAR_RATIO][1].raw, sdo[GEAR_RATIO][2].raw
    except SdoAbortedError as exc:
        if exc.code in (0x06020000, 0x06090011):
            return None
        raise
