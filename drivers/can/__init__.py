"""CAN actuator backends over python-can: MIT-mode motors (``can_mit``) and CiA 402 drives (``cia402``)."""
from .cia402 import Cia402Driver
from .mit import MODELS, MitDriver, MitModel

__all__ = ["Cia402Driver", "MODELS", "MitDriver", "MitModel"]


def driver_from_config(drv: dict, model, transmission, source: str = "<config>"):
    """Create the ``can_mit`` or ``cia402`` driver from a validated ``[driver]`` table."""
    from ..base import create_driver
    if not drv.get("can_channel"):
        raise ValueError(f"backend '{drv['backend']}' needs 'can_channel' (e.g. 'can0')")
    ids = drv.get("can_ids")
    if ids is None:
        raise ValueError(f"backend '{drv['backend']}' needs 'can_ids' (one per actuated joint)")
    ids = ids if isinstance(ids, list) else [ids]
    common = dict(interface=drv["can_interface"], channel=drv["can_channel"], mode=drv["mode"],
                  transmission=transmission, reply_timeout=drv["read_timeout"], max_missed=drv["max_failed_cycles"])
    if drv["backend"] == "can_mit":
        return create_driver("can_mit", model, can_ids=ids, motor_model=drv["motor_model"], **common)
    return create_driver("cia402", model, node_ids=ids, **common)
