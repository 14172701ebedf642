"""The fixed-rate control loop: read -> trajectory -> controller -> safety -> write, every period.

The loop owns its hardware components (:class:`~rtctl.rt.hardware.Hardware`: one or several drivers,
each over its own joints) and activates the controller (``on_activate``) before its first cycle and
again on a re-arm, so a controller with internal state (an integrator, a clock) starts clean.

Timing uses absolute deadlines on the monotonic clock: the loop sleeps until
``spin_margin`` before the next deadline and busy-waits the rest, so compute
time never accumulates into drift. Each cycle records its period, wake-up
latency (wake time - deadline) and compute time, allocation-free. A driver whose
bus has its own clock (EtherCAT's distributed clocks) moves the next deadline by
its ``cycle_correction`` to follow it: the loop's period is then that clock's.

A cycle whose work ends after the next deadline is an overrun. Policies:
``count`` (default; just count), ``skip`` (drop the missed deadlines and
resynchronise), ``trip`` (after ``max_consecutive_overruns`` in a row, trip the
safety monitor). Any exception raised by a component moves the system to the
safe state: the component enters its error state, the safety monitor latches,
and the loop keeps sending the safe command until it ends.

Before the hardware is activated every kernel a run can reach is compiled or loaded from numba's cache
(:meth:`ControlLoop.warm`, :mod:`rtctl.rt.warmup`), and the run watches that none is first reached
after activation (its report names any that was).

The control time handed to the trajectory is ``deadline index x period``,
independent of the wall clock, so runs are reproducible; ``pace=False`` runs
cycles back to back (offline simulation, sweeps) with the same control time.
"""
from __future__ import annotations

import gc
import time

import numpy as np
from numba import njit

from .estimation import BaseTruth
from .hardware import Hardware
from .interfaces import Command, RobotState
from .limits import MIN_JERK_PEAK_ACCELERATION, MIN_JERK_PEAK_VELOCITY, SafetyError
from .lifecycle import Lifecycle
from .hooks import LoopHook, LoopSink
from .realtime import RealtimeSettings, apply_realtime, restore_scheduler
from .signals import signal_name, stop_requests
from .stats import CycleStats, LoopReport, trip_history
from .warmup import KernelWatch, ScratchCycle

__all__ = ["ControlLoop", "LoopReport", "OVERRUN_POLICIES"]

OVERRUN_POLICIES = ("count", "skip", "trip")


# The re-arm recovery move: ControlLoop._recovery_state, and the slots of ControlLoop._recovery.
R_IDLE, R_START, R_ACTIVE = 0, 1, 2
R_T0, R_DURATION = 0, 1
H1_PEAK_ACCELERATION = 3.94  # max of |d2h1/dtau2| on [0, 1] (at tau = 0.243), h1 below
H1_TAIL_VELOCITY = 0.512     # max of |dh1/dtau| on [0.2, 1] (at tau = 0.2 and 0.6), where p's blend moves fast
RECOVERY_SHARE = 0.5  # of each joint's velocity bound and acceleration limit; the rest is the trajectory's
RECOVERY_FLOOR = 0.1  # of the velocity bound: the least a recovery gets when its trajectory leaves less


@njit(cache=True)
def _recovery_blend(t, start, q, v, q_index, v_index, q_d, qd_d, qdd_d, offset, recovery, vmax, amax):
    """Shift the desired motion by ``p h0(tau) + T w h1(tau)``, the quintic Hermite blend that starts at the
    measured position and velocity and ends on the trajectory with zero offset, velocity and acceleration:
    h0 = 1 - 10 tau^3 + 15 tau^4 - 6 tau^5, h1 = tau - 6 tau^3 + 8 tau^4 - 3 tau^5.

    On the first cycle after a re-arm (``start``) the position offset p (measured minus desired, in
    ``offset[0]``) and velocity offset w (``offset[1]``) are taken, and the duration T is the shortest in
    which the offset's own peak velocity (1.875 |p| / T, beside the 0.512 |w| the velocity offset's blend can
    still add where p's is fast, tau >= 0.2; at least half of ``vmax`` is left to p's) and acceleration
    (5.774 |p| / T^2, 3.94 |w| / T) stay within ``vmax`` and ``amax`` (:meth:`ControlLoop.rearm` sets them to
    what the trajectory leaves of each joint's bounds). Returns whether the move goes on after this cycle.
    Allocates nothing."""
    n = q_index.shape[0]
    if start:
        duration = 0.0
        for k in range(n):
            offset[0, k] = q[q_index[k]] - q_d[k]
            offset[1, k] = v[v_index[k]] - qd_d[k]
            p, w = abs(offset[0, k]), abs(offset[1, k])
            room = max(vmax[k] - H1_TAIL_VELOCITY * w, 0.5 * vmax[k])
            duration = max(duration, MIN_JERK_PEAK_VELOCITY * p / room,
                           np.sqrt(MIN_JERK_PEAK_ACCELERATION * p / amax[k]), H1_PEAK_ACCELERATION * w / amax[k])
        recovery[R_T0] = t
        recovery[R_DURATION] = duration
    duration = recovery[R_DURATION]
    tau = (t - recovery[R_T0]) / duration if duration > 0.0 else 1.0
    if tau >= 1.0:
        return False
    t2 = tau * tau
    t3 = t2 * tau
    h0 = 1.0 - t3 * (10.0 - 15.0 * tau + 6.0 * t2)
    dh0 = -30.0 * t2 * (1.0 - 2.0 * tau + t2)
    ddh0 = -60.0 * tau * (1.0 - 3.0 * tau + 2.0 * t2)
    h1 = tau - t3 * (6.0 - 8.0 * tau + 3.0 * t2)
    dh1 = 1.0 - t2 * (18.0 - 32.0 * tau + 15.0 * t2)
    ddh1 = -tau * (36.0 - 96.0 * tau + 60.0 * t2)
    for k in range(n):
        p, w = offset[0, k], offset[1, k]
        q_d[k] += p * h0 + duration * w * h1
        qd_d[k] += p * dh0 / duration + w * dh1
        qdd_d[k] += p * ddh0 / (duration * duration) + w * ddh1 / duration
    return True


@njit(cache=True)
def _accumulate_tracking(q, q_index, q_d, max_abs, sum_sq):
    for k in range(q_index.shape[0]):
        _accumulate(k, q_d[k] - q[q_index[k]], max_abs, sum_sq)


@njit(cache=True)
def _accumulate_error(error, max_abs, sum_sq):
    for k in range(error.shape[0]):
        _accumulate(k, error[k], max_abs, sum_sq)


@njit(cache=True, inline="always")
def _accumulate(k, e, max_abs, sum_sq):
    a = abs(e)
    if a > max_abs[k] or not np.isfinite(a):
        max_abs[k] = a
    sum_sq[k] += e * e


class ControlLoop:
    """Runs drivers, a trajectory, a controller and a safety monitor at a fixed rate."""

    def __init__(self, *, model, drivers, controller, trajectory, safety, rate_hz: float = 1000.0,
                 overrun_policy: str = "count", max_consecutive_overruns: int = 10, pace: bool = True,
                 realtime: RealtimeSettings | None = None, spin_margin: float = 2e-4,
                 stats_capacity: int = 100_000, hooks=(), telemetry=None, boundary_hooks=(), sensors=(),
                 estimator=None):
        if not (np.isfinite(rate_hz) and rate_hz > 0):
            raise ValueError(f"rate_hz must be > 0, got {rate_hz}")
        if overrun_policy not in OVERRUN_POLICIES:
            raise ValueError(f"overrun_policy must be one of {OVERRUN_POLICIES}, got {overrun_policy!r}")
        if max_consecutive_overruns < 1:
            raise ValueError(f"max_consecutive_overruns must be >= 1, got {max_consecutive_overruns}")
        self.model = model
        self.hardware = Hardware(model, drivers, sensors)
        self.drivers, self.sensors = self.hardware.drivers, self.hardware.sensors
        self.estimator = estimator   # a StateEstimator (rtctl.rt.estimation) writing the base's q and v, or None
        self.sampling = self.hardware.sampling(1.0 / float(rate_hz))  # for the gains' stability bound
        safety.configure(self.sampling)  # the hold's gains at this rate, its kernel run once: before any activation
        self._plant_clocks = tuple(d.plant_seconds for d in self.drivers)  # each driver's in-process plant time (s)
        self.controller = controller
        self.trajectory = trajectory
        self.safety = safety
        self.rate_hz = float(rate_hz)
        self.period = 1.0 / self.rate_hz
        self.overrun_policy = overrun_policy
        self.max_consecutive_overruns = int(max_consecutive_overruns)
        self.pace = pace
        self.realtime = realtime or RealtimeSettings()
        self.spin_margin = spin_margin
        self.hooks = list(hooks)
        self.telemetry = telemetry  # sink: .sample(loop, t) once per cycle after the write (allocation-free)
        self.boundary_hooks = list(boundary_hooks)  # hook(loop) at each cycle boundary, before the read
        self.control = None     # the control channel serving this loop, if any (rtctl.operator.wiring)
        self.schedule = None    # a config's [[schedule]] of commands, if any
        self.state = RobotState(model)
        self.state.sensors = self.hardware.readings
        self.command = Command(model)
        self.base_truth = BaseTruth(model)     # the drivers' base before the estimator (a simulator's truth)
        self._base_views = (self.state.q[:self.base_truth.q.size], self.state.v[:self.base_truth.v.size])
        n = controller.n
        self.q_d, self.qd_d, self.qdd_d = np.zeros(n), np.zeros(n), np.zeros(n)
        self.stats = CycleStats(stats_capacity)
        tracked = controller.tracked()
        self.tracked_names = list(controller.joint_names) if tracked is None else list(tracked[0])
        self._tracked_error = None if tracked is None else tracked[1]   # else the joints' q_d - q
        self.tracking_max = np.zeros(len(self.tracked_names))
        self.tracking_sum_sq = np.zeros(len(self.tracked_names))
        self.cycle = 0
        self._recovery = np.zeros(2)
        self._recovery_state = R_IDLE
        self._recovery_offset = np.zeros((2, n))
        self._recovery_vmax = np.ascontiguousarray(safety.velocity_bound)
        self._recovery_amax = np.ascontiguousarray(RECOVERY_SHARE * safety.acceleration_limit, dtype=float)
        self.failures: list[str] = []
        self._controller_active = False
        self._consecutive_overruns = 0
        self._stop_requested = False
        self.stopped_by, self._safe_command_written = "", False
        self.realtime_message = ""
        self._warmed = False
        self.late_kernels: list[str] = []  # kernels first reached after activation, over all runs

    # -- one cycle ---------------------------------------------------------------
    def step(self, t: float) -> None:
        """One control cycle at control time ``t`` (no pacing; the parts of its compute time go to
        ``stats.parts``, see :mod:`rtctl.rt.stats`)."""
        clock = time.perf_counter
        parts, slot = self.stats.parts, self.stats.slot
        start = clock()
        state, command = self.state, self.command
        for hook in self.boundary_hooks:
            hook(self)
        hardware = self.hardware
        fresh = True
        for k, driver in enumerate(self.drivers):
            if hardware.ok[k]:
                try:
                    fresh = driver.read(state, t) and fresh
                except Exception as exc:  # a driver must not raise; if it does, it is finished
                    self._component_failed(driver, "read", exc)
                    fresh = False
            else:
                fresh = False
        state.fresh = fresh
        hardware.read_sensors(t)
        estimator = self.estimator
        if estimator is not None:
            np.copyto(self.base_truth.q, self._base_views[0])
            np.copyto(self.base_truth.v, self._base_views[1])
            try:
                estimator.update(t, state)
            except Exception as exc:
                self._component_failed(estimator, "update", exc)
        read_done = clock()
        try:
            self.trajectory.sample(t, self.q_d, self.qd_d, self.qdd_d)
            if self._recovery_state != R_IDLE:
                going_on = _recovery_blend(t, self._recovery_state == R_START, state.q, state.v,
                                           self.controller.q_index, self.controller.v_index, self.q_d, self.qd_d,
                                           self.qdd_d, self._recovery_offset, self._recovery, self._recovery_vmax,
                                           self._recovery_amax)
                self._recovery_state = R_ACTIVE if going_on else R_IDLE
            self.controller.update_command(t, self.period, state.q, state.v, self.q_d, self.qd_d, self.qdd_d,
                                           command)
        except Exception as exc:
            self._component_failed(self.controller, "update", exc)
        for hook in self.hooks:
            hook(self.cycle, t, state, command)
        fault = hardware.fault() or (estimator.fault_reason if estimator is not None else "")
        if fault:
            self.safety.check(state, command, driver_fault=True, reason=fault)
        else:
            self.safety.check(state, command)
        control_done = clock()
        plant = 0.0
        for k, driver in enumerate(self.drivers):
            if hardware.ok[k]:
                try:
                    driver.write(command, t)
                except Exception as exc:
                    self._component_failed(driver, "write", exc)
                plant += self._plant_clocks[k][0]
        if self._tracked_error is None:
            _accumulate_tracking(state.q, self.controller.q_index, self.q_d, self.tracking_max, self.tracking_sum_sq)
        else:
            _accumulate_error(self._tracked_error, self.tracking_max, self.tracking_sum_sq)
        write_done = clock()
        parts[0, slot] = read_done - start
        parts[1, slot] = control_done - read_done
        parts[2, slot] = write_done - control_done - plant
        parts[3, slot] = plant
        if self.telemetry is not None:
            self.telemetry.sample(self, t)
            parts[4, slot] = clock() - write_done
        else:
            parts[4, slot] = 0.0
        self.cycle += 1

    def _component_failed(self, component, where: str, exc: Exception) -> None:
        reason = f"{getattr(component, 'name', type(component).__name__)}.{where}: {type(exc).__name__}: {exc}"
        self.failures.append(reason)
        if isinstance(component, Lifecycle):
            component.fail(reason)
        if component in self.drivers:
            self.hardware.failed(component)
        self.command.effort[:] = 0.0
        if not self.safety.tripped:
            self.safety.estop(reason)

    def rearm(self, estop_count: int | None = None) -> str:
        """Leave the safe state (from the loop's thread: a boundary hook) and rejoin the trajectory.

        The monitor re-arms from the latest measured state (:meth:`SafetyMonitor.rearm`; joints just
        outside their soft limits are re-armed into recovery), and the desired motion starts at the
        measured position and velocity and blends into the trajectory by a quintic recovery move
        (:func:`_recovery_blend`), so the controller never sees a step. The move may use the velocity
        the trajectory leaves free (its ``peak_velocity()``, if it has one; else
        :data:`RECOVERY_SHARE` of the bound) and :data:`RECOVERY_SHARE` of the acceleration limit. Raises
        :class:`rtctl.safety.SafetyError` naming what blocks it."""
        if not self.safety.tripped:
            return "armed already"
        if not self.hardware.all_ok:
            raise SafetyError(f"cannot re-arm: a driver failed ({self.failures[-1] if self.failures else ''}); "
                              "restart the run")
        recovering = self.safety.rearm(self.state, estop_count)
        self._activate_controller(again=True)
        bound = self.safety.velocity_bound
        peak = self.trajectory.peak_velocity()
        if peak is None:
            self._recovery_vmax[:] = RECOVERY_SHARE * bound
        else:
            self._recovery_vmax[:] = np.maximum(bound - np.asarray(peak, dtype=float), RECOVERY_FLOOR * bound)
        self._recovery_state = R_START
        return "re-armed" + (f"; recovery move for {recovering}" if recovering else "; rejoining the trajectory")

    def _activate_controller(self, again: bool = False) -> None:
        """``on_activate`` before the first cycle; ``on_deactivate`` then ``on_activate`` on a re-arm (a
        controller's integrators and clocks restart from the measured state, not from before the stop)."""
        if again and self._controller_active:
            self.controller.on_deactivate()
        self.controller.on_activate()
        self._controller_active = True

    @property
    def driver(self):
        """The loop's driver when it has exactly one (``drivers`` otherwise)."""
        if len(self.drivers) != 1:
            raise AttributeError(f"this loop has {len(self.drivers)} drivers: use loop.drivers")
        return self.drivers[0]

    @property
    def recovering(self) -> bool:
        """A recovery move after a re-arm is under way."""
        return self._recovery_state != R_IDLE

    def request_stop(self) -> None:
        """End the run at the next cycle boundary, after the cycle in progress (callable from a hook or
        the telemetry sink). :meth:`run` then returns its report over the cycles that ran."""
        self._stop_requested = True

    def _stop_for_signal(self, signum: int) -> None:
        """A stop signal (:mod:`rtctl.rt.signals`): end the run at the next cycle boundary, in order."""
        self.stopped_by = signal_name(signum)
        self._stop_requested = True

    # -- the run -------------------------------------------------------------------------
    def warm(self) -> None:
        """Compile, or load from numba's cache, every kernel a run can reach (:mod:`rtctl.rt.warmup`): the
        loop's own (the recovery move of a re-arm, the tracking sums), then each component's ``warm`` on
        copies of the loop's arrays. :meth:`run` calls it before the hardware is activated; the
        controller's ``on_activate`` follows before the first cycle."""
        cycle = ScratchCycle(self)
        n = self.controller.n
        offset, recovery = np.zeros((2, n)), np.zeros(2)
        for start in (True, False):
            _recovery_blend(cycle.t, start, cycle.state.q, cycle.state.v, self.controller.q_index,
                            self.controller.v_index, cycle.q_d, cycle.qd_d, cycle.qdd_d, offset, recovery,
                            self._recovery_vmax, self._recovery_amax)
        _accumulate_tracking(cycle.state.q, self.controller.q_index, cycle.q_d, np.zeros(n), np.zeros(n))
        _accumulate_error(np.zeros(6), np.zeros(6), np.zeros(6))
        parts = (*self.drivers, *self.sensors, *((self.estimator,) if self.estimator is not None else ()),
                 self.trajectory, self.controller,
                 *(h for h in (*self.hooks, *self.boundary_hooks) if isinstance(h, LoopHook)),
                 *((self.telemetry,) if isinstance(self.telemetry, LoopSink) else ()))
        for part in parts:
            try:
                part.warm(cycle)
            except ValueError:  # a value it refuses (a NaN desired motion): the first cycle meets it again and
                pass            # trips the safety monitor; what it did not reach is named as a late kernel

    def _kernel_packages(self) -> set:
        """The top-level packages whose kernels the run may reach: rtctl's and those of its components'
        classes (a plugin's)."""
        parts = (self.controller, self.trajectory, self.safety, self.telemetry, self.estimator, *self.drivers,
                 *self.sensors, *self.hooks, *self.boundary_hooks)
        return {"rtctl"} | {type(part).__module__.partition(".")[0] for part in parts if part is not None}

    def run(self, duration: float | None = None, cycles: int | None = None) -> LoopReport:
        """Run for ``duration`` seconds of control time or ``cycles`` cycles (one of them).

        Before the hardware is activated, every kernel the run can reach is made ready (:meth:`warm`,
        on the first run) and the scheduler settings are applied (paced runs only: an offline run takes
        none). What the run reached for the first time after activation is in the report's
        ``late_kernels``.

        Under :class:`rtctl.rt.signals.StopSignals`, SIGINT, SIGTERM or SIGHUP ends the run at the next cycle
        boundary: the safety monitor's safe command is written once through the drivers, then each driver is
        deactivated, and the report names the signal (``stopped_by``). A signal before the hardware came up
        ends the run before it does."""
        if (duration is None) == (cycles is None):
            raise ValueError("give exactly one of duration or cycles")
        n_cycles = int(round(duration * self.rate_hz)) if cycles is None else int(cycles)
        if n_cycles < 1:
            raise ValueError(f"a run needs at least one cycle, got {n_cycles}")
        self.stopped_by, self._safe_command_written = "", False
        with stop_requests(self._stop_for_signal):
            self._run(n_cycles)
        return self.report()

    def _run(self, n_cycles: int) -> None:
        if not self._warmed:
            self.warm()
            self._warmed = True
        # Prepare the process first (a full collection can pause for a long time), then bring up the
        # hardware, so nothing stalls between activation and the first cycle: a drive's heartbeat or
        # watchdog would see the pause as a lost master.
        gc_was_enabled = gc.isenabled()
        try:
            self._prepare_process()
        except BaseException:  # e.g. Ctrl-C in the collection: the scheduler and the collector come back
            self._restore_process(gc_was_enabled)
            raise
        watch = KernelWatch(self._kernel_packages()).start()
        first = self.cycle
        try:
            if not self.stopped_by:
                self.hardware.bring_up()
                for hook in self.hooks:  # a hook with a state (the collision observer) restarts with the hardware
                    if isinstance(hook, LoopHook):
                        hook.on_start()
                if self.estimator is not None:
                    self.estimator.on_start()
                if not self._controller_active:
                    self._activate_controller()
            if not self.stopped_by:             # a signal while the hardware came up: no cycle
                (self._run_paced if self.pace else self._run_unpaced)(n_cycles)
        finally:
            self._stop_requested = False
            try:
                self._shut_down(first)          # first: still the loop's scheduling, no collector
            finally:
                self._restore_process(gc_was_enabled)
                self.late_kernels += [k for k in watch.stop() if k not in self.late_kernels]

    def _shut_down(self, first_cycle: int) -> None:
        """Every driver deactivated; after a stop signal that ended cycles, the safe command written once before."""
        last = None
        if self.stopped_by and self.cycle > first_cycle:
            self.safety.safe_command(self.state, self.command)
            last, self._safe_command_written = self.command, True
        self.failures += self.hardware.shut_down(last, self.cycle * self.period)

    def _prepare_process(self) -> None:
        """The scheduler settings (a paced run), then the collector: collected and frozen, then disabled."""
        if self.pace:
            report = apply_realtime(self.realtime)
            self.realtime_message = report.message()
            if report.not_applied:
                print(f"rtctl: {self.realtime_message}; running without them", flush=True)
        else:
            self.realtime_message = "real-time settings not applied: an offline run (pace off) runs its cycles " \
                                    "back to back"
        if self.realtime.disable_gc:
            if not self.hardware.any_active:  # collecting next to live hardware would stall it
                gc.collect()
            gc.freeze()
            gc.disable()

    def _restore_process(self, gc_was_enabled: bool) -> None:
        if self.realtime.disable_gc:
            gc.unfreeze()
            if gc_was_enabled:
                gc.enable()
        if self.pace:
            restore_scheduler()

    def _run_unpaced(self, n_cycles: int) -> None:
        clock = time.perf_counter
        period = self.period
        start = self.cycle
        for k in range(n_cycles):
            wake = clock()
            self.step((start + k) * period)
            self.stats.record(period, 0.0, clock() - wake, False)
            if self._stop_requested:
                break

    def _run_paced(self, n_cycles: int) -> None:
        """Cycles at wall-clock rate; the first one runs untimed so that lazily compiled or
        first-touch work (numba cache loads, page faults) cannot count as an overrun."""
        clock, sleep = time.perf_counter, time.sleep
        period, margin, hardware = self.period, self.spin_margin, self.hardware
        self.step(self.cycle * period)
        n_cycles -= 1
        if self._stop_requested:
            return
        index = 0
        base = self.cycle
        t0 = clock() + period
        deadline = t0
        last_wake = t0 - period
        done = 0
        while done < n_cycles:
            remaining = deadline - clock()
            if remaining > margin:
                sleep(remaining - margin)
            while clock() < deadline:
                pass
            wake = clock()
            self.step((base + index) * period)
            end = clock()
            next_deadline = deadline + period + hardware.cycle_correction()
            overrun = end > next_deadline
            self.stats.record(wake - last_wake, wake - deadline, end - wake, overrun)
            last_wake = wake
            done += 1
            index += 1
            deadline = next_deadline
            if overrun:
                self._consecutive_overruns += 1
                if self.overrun_policy == "skip":
                    missed = int((end - deadline) / period) + 1
                    deadline += missed * period
                    index += missed
                    self.stats.skipped += missed
                elif self.overrun_policy == "trip" and self._consecutive_overruns >= self.max_consecutive_overruns \
                        and not self.safety.tripped:
                    self.safety.estop(f"{self._consecutive_overruns} consecutive overruns "
                                      f"(period {period * 1e6:.0f} us)")
            else:
                self._consecutive_overruns = 0
            if self._stop_requested:
                break

    def report(self) -> LoopReport:
        n = max(self.cycle, 1)
        summary = self.stats.summary()
        return LoopReport(
            cycles=self.cycle,
            duration=self.cycle * self.period,
            rate_hz=self.rate_hz,
            tracked_names=list(self.tracked_names),
            tracking_rms=np.sqrt(self.tracking_sum_sq / n),
            tracking_max=self.tracking_max.copy(),
            timing={k: v for k, v in summary.items() if isinstance(v, dict)},
            overruns=int(self.stats.overruns),
            skipped_cycles=int(self.stats.skipped),
            tripped=bool(self.safety.tripped),
            trip_reason=self.safety.trip_reason,
            operator_stop=bool(self.safety.tripped and self.safety.operator_stop),
            safety_events=[str(e) for e in self.safety.events],
            driver_health=self.hardware.health(),
            realtime=self.realtime_message,
            failures=list(self.failures),
            late=self.stats.late_summary(self.period),
            trips=self.safety.trip_count,
            rearms=self.safety.rearm_count,
            trip_history=trip_history(self.safety.events),
            late_kernels=list(self.late_kernels),
            notes=self.telemetry.notes() if isinstance(self.telemetry, LoopSink) else [],
            stopped_by=self.stopped_by,
            safe_command_written=self._safe_command_written,
        )
