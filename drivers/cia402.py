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
