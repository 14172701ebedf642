"""The CiA 402 drive profile as a master sees it, whatever the bus (CANopen, EtherCAT CoE): the controlword
commands and the statusword states of the drive state machine (CiA 402-2 6.2-6.3, IEC 61800-7-201: figure
"Finite state automaton", tables "Command coding" and "State coding"), and the controlword that moves a drive
one step towards OPERATION ENABLED.

The object indices and modes of operation are in :mod:`rtctl.drivers.can.objects` (they are the profile's,
CANopen's numbering, on either bus)."""
from __future__ import annotations

# Controlword commands.
CW_DISABLE_VOLTAGE = 0x00
CW_QUICK_STOP = 0x02
CW_SHUTDOWN = 0x06
CW_SWITCH_ON = 0x07
CW_ENABLE_OPERATION = 0x0F
CW_FAULT_RESET = 0x80

# Statusword states: name -> (mask, value).
STATES = {
    "NOT READY TO SWITCH ON": (0x4F, 0x00),
    "SWITCH ON DISABLED": (0x4F, 0x40),
    "READY TO SWITCH ON": (0x6F, 0x21),
    "SWITCHED ON": (0x6F, 0x23),
    "OPERATION ENABLED": (0x6F, 0x27),
    "QUICK STOP ACTIVE": (0x6F, 0x07),
    "FAULT REACTION ACTIVE": (0x4F, 0x0F),
    "FAULT": (0x4F, 0x08),
}
SW_OPERATION_ENABLED_MASK, SW_OPERATION_ENABLED = 0x6F, 0x27


def state_of(statusword: int) -> str:
    for name, (mask, value) in STATES.items():
        if statusword & mask == value:
            return name
    return "UNKNOWN"


def is_fault(statusword: int) -> bool:
    return statusword & 0x4F in (0x08, 0x0F)


def next_controlword(statusword: int, last_controlword: int) -> int:
    """The controlword that moves a drive one step towards OPERATION ENABLED."""
    state = state_of(statusword)
    if state == "FAULT":
        # Fault reset acts on the rising edge of bit 7.
        return CW_DISABLE_VOLTAGE if last_controlword & CW_FAULT_RESET else CW_FAULT_RESET
    if state in ("SWITCH ON DISABLED", "QUICK STOP ACTIVE", "NOT READY TO SWITCH ON"):
        return CW_SHUTDOWN if state == "SWITCH ON DISABLED" else CW_DISABLE_VOLTAGE
    if state == "READY TO SWITCH ON":
        return CW_SWITCH_ON
    return CW_ENABLE_OPERATION


# Emergency messages (CiA 301 7.2.7): the error code's class (CiA 301 table "Emergency error codes"), the codes
# a drive's profile adds (CiA 402-2, IEC 61800-7-201 annex "Error codes"), the error register 0x1001's bits
# (CiA 301 7.5.2.2).
ERROR_CODES = {
    0x2310: "continuous over current", 0x2320: "short circuit or earth leakage", 0x3210: "DC link over-voltage",
    0x3220: "DC link under-voltage", 0x4210: "excess temperature, device", 0x4310: "excess temperature, drive",
    0x5530: "data storage", 0x7121: "motor blocked", 0x7300: "sensor", 0x8110: "CAN overrun",
    0x8120: "CAN in error passive mode", 0x8130: "life guard or heartbeat error", 0x8140: "recovered from bus off",
    0x8150: "CAN-ID collision", 0x8210: "PDO not processed due to length error", 0x8220: "PDO length exceeded",
    0x8240: "unexpected SYNC data length", 0x8250: "RPDO timeout", 0x8611: "following error",
    0x8612: "reference limit",
}
ERROR_CLASSES = {
    0x00: "error reset or no error", 0x10: "generic error", 0x20: "current", 0x21: "current, device input side",
    0x22: "current inside the device", 0x23: "current, device output side", 0x30: "voltage", 0x31: "mains voltage",
    0x32: "voltage inside the device", 0x33: "output voltage", 0x40: "temperature", 0x41: "ambient temperature",
    0x42: "device temperature", 0x50: "device hardware", 0x60: "device software", 0x61: "internal software",
    0x62: "user software", 0x63: "data set", 0x70: "additional modules", 0x80: "monitoring", 0x81: "communication",
    0x82: "protocol error", 0x90: "external error", 0xF0: "additional functions", 0xFF: "device specific",
}
ERROR_REGISTER_BITS = ("generic", "current", "voltage", "temperature", "communication", "device profile",
                       "reserved", "manufacturer")


def error_code_name(code: int) -> str:
    """An emergency error code's meaning: the profile's own code, else its class (its high byte, then nibble)."""
    return ERROR_CODES.get(code) or ERROR_CLASSES.get(code >> 8) or ERROR_CLASSES.get(code >> 12 << 4, "unknown")


def emergency_line(code: int, register: int, manufacturer: bytes = b"") -> str:
    """One emergency as a phrase: ``EMCY 0x2310 (continuous over current), error register 0x03 (generic,
    current)``, and its manufacturer-specific bytes where any is set."""
    bits = ", ".join(name for bit, name in enumerate(ERROR_REGISTER_BITS) if register >> bit & 1) or "none"
    line = f"EMCY 0x{code:04X} ({error_code_name(code)}), error register 0x{register:02X} ({bits})"
    return line + (f", manufacturer bytes {manufacturer.hex(' ')}" if any(manufacturer) else "")
