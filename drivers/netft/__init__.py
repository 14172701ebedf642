"""ATI Net F/T six-axis force-torque sensors over RDT (UDP): :mod:`.protocol` (the wire formats, from the
manual) and :mod:`.driver` (the ``netft`` sensor backend)."""
from .driver import NetFT

__all__ = ["NetFT"]
