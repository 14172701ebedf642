"""Recipe "add a robot": a function returning an rtctl Model, advertised under ``rtctl.robots``."""
import numpy as np

from rtctl.model import ModelBuilder


def two_link_demo():
    """A planar two-link arm (fixed base, two revolute joints about z), 1 kg and 0.5 kg links."""
    b = ModelBuilder("two_link_demo")
    b.add_body("upper", -1, "revolute", joint_name="shoulder", axis=(0, 0, 1), mass=1.0, com=(0.15, 0, 0),
               inertia=np.diag([1e-3, 8e-3, 8e-3]), lower=-2.5, upper=2.5, velocity_limit=4.0, effort_limit=40.0)
    b.add_body("fore", "upper", "revolute", joint_name="elbow", axis=(0, 0, 1), translation=(0.3, 0, 0),
               mass=0.5, com=(0.12, 0, 0), inertia=np.diag([5e-4, 3e-3, 3e-3]), lower=-2.5, upper=2.5,
               velocity_limit=4.0, effort_limit=20.0)
    return b.build()
