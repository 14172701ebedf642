"""What the joints of an actuator-space model move when the model's own tree does not carry it.

A parallel mechanism (the Stewart platform, the jaw rehabilitation robot) runs in the loop as six
prismatic "leg" joints: their positions, rates and forces are the actuators'. The tree's bodies are
massless; the mass the legs move is a closed chain whose dynamics the plant and the controller compute
with the mechanism's own formulation. :class:`ClosedChain` says so on the model, so a report of it gives
the chain's masses and does not call the legs massless subtrees whose forward dynamics raises.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClosedChain:
    """``description`` of the mechanism (with its source), each moving ``part`` as ``(name, mass kg)``, and
    ``dynamics``: which formulation moves the joints."""

    description: str
    parts: tuple[tuple[str, float], ...]
    dynamics: str

    @property
    def total_mass(self) -> float:
        return float(sum(mass for _, mass in self.parts))

    def report(self) -> list[str]:
        return ([f"closed chain: {self.description}", f"  dynamics: {self.dynamics}"]
                + [f"  {name}: {mass:.6g} kg" for name, mass in self.parts])
