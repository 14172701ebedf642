"""CAN actuator backends over python-can: MIT-mode motors (``can_mit``) and CiA 402 drives (``cia402``)."""
from .cia402 import Cia402Driver
from .mit import MODELS, MitDriver, MitModel

__all__ = ["Cia402Driver", "MODELS", "MitDriver", "MitModel"]
