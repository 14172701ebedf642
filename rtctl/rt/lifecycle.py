"""ros2_control-style lifecycle for everything the loop drives.

configure -> activate -> (read / update / write every cycle) -> deactivate, plus an
error state entered by :meth:`Lifecycle.fail`. Transitions out of order raise.
"""
from __future__ import annotations

import enum


class LifecycleState(enum.Enum):
    UNCONFIGURED = "unconfigured"
    INACTIVE = "inactive"
    ACTIVE = "active"
    ERROR = "error"


class LifecycleError(RuntimeError):
    pass


class Lifecycle:
    """Mixin: subclasses implement ``on_configure``/``on_activate``/``on_deactivate`` as needed."""

    name = "component"

    def __init__(self) -> None:
        self.lifecycle_state = LifecycleState.UNCONFIGURED
        self.error_reason = ""

    def _transition(self, expected: tuple[LifecycleState, ...], target: LifecycleState, hook) -> None:
        if self.lifecycle_state not in expected:
            raise LifecycleError(
                f"{self.name}: cannot go to {target.value} from {self.lifecycle_state.value}"
            )
        try:
            hook()
        except Exception as exc:
            self.fail(f"{target.value} failed: {exc}")
            raise
        self.lifecycle_state = target

    def configure(self) -> None:
        self._transition((LifecycleState.UNCONFIGURED, LifecycleState.INACTIVE), LifecycleState.INACTIVE,
                         self.on_configure)

    def activate(self) -> None:
        self._transition((LifecycleState.INACTIVE,), LifecycleState.ACTIVE, self.on_activate)

    def deactivate(self) -> None:
        if self.lifecycle_state == LifecycleState.ACTIVE:
            self._transition((LifecycleState.ACTIVE,), LifecycleState.INACTIVE, self.on_deactivate)

    def fail(self, reason: str) -> None:
        """Enter the error state (a failing component moves the system to the safe state)."""
        self.error_reason = reason
        self.lifecycle_state = LifecycleState.ERROR

    def recover(self) -> None:
        """Leave the error state back to unconfigured (configure again before use)."""
        if self.lifecycle_state == LifecycleState.ERROR:
            self.error_reason = ""
            self.lifecycle_state = LifecycleState.UNCONFIGURED

    @property
    def active(self) -> bool:
        return self.lifecycle_state == LifecycleState.ACTIVE

    def on_configure(self) -> None:
        pass

    def on_activate(self) -> None:
        pass

    def on_deactivate(self) -> None:
        pass
