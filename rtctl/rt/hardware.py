"""The hardware components a loop owns (ros2_control's ResourceManager is the model).

Several drivers at once -- e.g. two Dynamixel chains and a CAN bus -- each over its own actuated
joints, each with its lifecycle (configure / activate / read / write / deactivate) and error state.
A fault or an exception in any one puts the whole robot in the safe state: the failed driver stops
its actuators and is no longer used, every other driver keeps receiving the safe command.
Sensors (IMU, force-torque, contact: ``rtctl.drivers.sensor``) come up before the drivers and go down
after them; a sensor's latched fault (a stale or non-finite sample, a dead device) is the safe state too.
"""
from __future__ import annotations

from .interfaces import actuated_indices
from .lifecycle import Lifecycle, LifecycleState
from .stability import Sampling


class HardwareError(ValueError):
    """The drivers do not cover the robot's actuated joints exactly once (the message names the joints)."""


def check_joint_ownership(model, drivers) -> None:
    """Every actuated joint driven by exactly one driver; HardwareError naming the joints otherwise."""
    _, _, names = actuated_indices(model)
    owner: dict[str, str] = {}
    for driver in drivers:
        for joint in driver.joint_names:
            if joint in owner:
                raise HardwareError(f"joint '{joint}' is driven by both {owner[joint]} and {driver.name}")
            owner[joint] = driver.name
    missing = [j for j in names if j not in owner]
    if missing:
        raise HardwareError(f"no driver drives the actuated joints {missing} (give each driver its 'joints')")


class Hardware:
    """The drivers of one loop, in order; ``ok[k]`` is False once driver k has failed."""

    def __init__(self, model, drivers, sensors=()):
        drivers = list(drivers)
        if not drivers:
            raise HardwareError("a loop needs at least one driver")
        check_joint_ownership(model, drivers)
        self.drivers = drivers
        self.ok = [True] * len(drivers)
        self.sensors = list(sensors)
        names = [s.options.name for s in self.sensors]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise HardwareError(f"sensor names {twice} are given to more than one sensor")
        self.readings = {s.options.name: s.reading for s in self.sensors}

    def bring_up(self) -> None:
        """Configure and activate every sensor, then every driver; if one fails, the ones already active are
        deactivated."""
        started = []
        try:
            for driver in (*self.sensors, *self.drivers):
                if driver.lifecycle_state == LifecycleState.UNCONFIGURED:
                    driver.configure()
                if driver.lifecycle_state == LifecycleState.INACTIVE:
                    driver.activate()
                started.append(driver)
        except Exception:
            for driver in reversed(started):
                try:
                    driver.deactivate()
                except Exception:  # noqa: BLE001  (best effort on the way out)
                    pass
            raise

    def shut_down(self, last_command=None, now: float = 0.0) -> list[str]:
        """Write ``last_command`` (an orderly stop's safe command) once through every driver still in service,
        then deactivate every driver (torque off); returns the failures, never raises."""
        failures = []
        if last_command is not None:
            for k, driver in enumerate(self.drivers):
                if self.ok[k] and driver.active:
                    try:
                        driver.write(last_command, now)
                    except Exception as exc:  # noqa: BLE001  (its deactivate still comes)
                        failures.append(f"{driver.name}.write: {exc}")
        for driver in (*self.drivers, *self.sensors):
            try:
                driver.deactivate()
            except Exception as exc:  # noqa: BLE001
                failures.append(f"{driver.name}.deactivate: {exc}")
        return failures

    def read_sensors(self, now: float) -> None:
        """Every sensor's read (they never raise: a problem is a latched fault, see :meth:`fault`)."""
        for sensor in self.sensors:
            sensor.read(now)

    def fault(self) -> str:
        """The first latched driver fault as ``"name: reason"``, then the first sensor's (its reason names
        it), or ``""``."""
        for driver in self.drivers:
            if driver.health.fault:
                return f"{driver.name}: {driver.health.fault_reason}" if len(self.drivers) > 1 \
                    else driver.health.fault_reason
        for sensor in self.sensors:
            if sensor.health.fault:
                return sensor.health.fault_reason
        return ""

    def failed(self, driver) -> None:
        """Driver ``driver`` raised: it stops its actuators and is not used again."""
        self.ok[self.drivers.index(driver)] = False
        try:
            driver.safe_stop()
        except Exception:  # noqa: BLE001  (best effort on the way to the safe state)
            pass

    def sampling(self, period: float) -> Sampling:
        """How a loop of ``period`` s samples these joints: the longest latency and the largest position share
        of the drivers (``latency_cycles``, ``position_share``: the conservative ends of both)."""
        return Sampling(period, max(int(d.latency_cycles) for d in self.drivers),
                        max(float(d.position_share) for d in self.drivers))

    def cycle_correction(self) -> float:
        """Seconds the loop's next deadline moves to follow a driver's bus clock (each driver's
        ``cycle_correction``, summed: one bus clock leads a robot)."""
        total = 0.0
        for driver in self.drivers:
            total += driver.cycle_correction
        return total

    @property
    def all_ok(self) -> bool:
        return all(self.ok)

    @property
    def any_active(self) -> bool:
        return any(d.active for d in self.drivers)

    def health(self) -> dict:
        """Counters summed over the drivers, ``fault`` if any has one."""
        total = {"reads": 0, "writes": 0, "timeouts": 0, "corrupt": 0, "fault": False}
        for driver in self.drivers:
            h = driver.health
            for key in ("reads", "writes", "timeouts", "corrupt"):
                total[key] += getattr(h, key)
            total["fault"] = total["fault"] or h.fault
        return total


__all__ = ["Hardware", "HardwareError", "Lifecycle", "check_joint_ownership"]
