"""The ``[driver]`` keys of the ``ethercat`` backend (:mod:`.driver`), declared once."""
from __future__ import annotations

from dataclasses import dataclass

from rtctl.options import setting

from ..base import ActuatorDriver

U32 = 0xFFFFFFFF


@dataclass(frozen=True)
class EthercatOptions(ActuatorDriver.Options):
    """``[driver]`` keys of the ``ethercat`` backend (one value for every slave, or one per joint's slave)."""

    ethercat_interface: str = setting("str", None, required=True)  # the network interface the line is on
    slave_positions: object = setting("ints", None, low=0, high=65534)   # each joint's slave (0 first); default in order
    vendor_id: object = setting("ints", None, low=0, high=U32, required=True)     # SII identity, checked
    product_code: object = setting("ints", None, low=0, high=U32, required=True)
    revision: object = setting("ints", None, low=0, high=U32)      # checked where given
    pdo_mapping: str = setting("str", "config", choices=("config", "slave"))   # map by SDO, or the slave's own
    read_timeout: float = setting("float", 5e-4, positive=True)    # s a read waits for its frame
    max_failed_cycles: int = setting("int", 3, low=1)              # lost frames / wrong working counters in a row
    watchdog: float = setting("float", 0.1, low=1e-3, high=6.0)    # s: each slave's sync manager watchdog
    distributed_clocks: bool = setting("bool", False)              # SYNC0 at the loop period
    follow_reference_clock: bool = setting("bool", True)          # with them: the loop's cycle on the reference clock
    encoder_counts: object = setting("ints", None, positive=True)  # increments per motor turn (default: 0x608F)
    rated_torque: object = setting("floats", None, positive=True)  # N m at the motor (default: 0x6076)
    quick_stop_option: int = setting("int", None, low=0, high=8)   # 0x605A written at configure (default: the drive's)
    activate_timeout: float = setting("float", 2.0, positive=True)  # s for OP and OPERATION ENABLED
    torque_offset: bool = setting("bool", False)      # position / velocity mode: the effort as 0x60B2 (feed-forward)
    mailbox_poll_cycles: int = setting("int", 10, low=0)          # cycles between mailbox reads (EMCY); 0: at faults


def per_slave(name: str, value, n: int) -> list | None:
    if value is None:
        return None
    values = value if isinstance(value, list) else [value] * n
    if len(values) != n:
        raise ValueError(f"{name}: {len(values)} values for {n} joints (give one, or one per joint)")
    return values
