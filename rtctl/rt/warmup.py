"""Every kernel a run can reach is compiled, or loaded from numba's cache, before the hardware is activated.

numba compiles a kernel at its first call with new argument types, or loads it from its on-disk cache:
the re-arm's recovery move compiled inside the loop held a cycle for 1.3 s (empty cache, 2 cores at load
6.5; a drive's watchdog trips long before). So :meth:`~rtctl.rt.loop.ControlLoop.run` first has each component call what it can
call, on copies of the loop's arrays (a :class:`ScratchCycle`: the run's shapes and dtypes, no state the
run reads): the loop its own kernels (the recovery blend of a re-arm, the tracking sums), each driver
its plant, the trajectory and the controller their per-cycle step, each hook
(:class:`~rtctl.rt.hooks.LoopHook`) and the telemetry sink (:class:`~rtctl.rt.hooks.LoopSink`) theirs,
including the paths a run takes only rarely (a collision reaction). Each component class declares its
``warm`` beside its code, with a default on its base class. (The safety check, the e-stop's safe command
included, and the telemetry hand-off are compiled when their modules are imported: their kernels declare
their signatures.)

:class:`KernelWatch` checks that none was forgotten: what a run reached for the first time after
activation is what an empty cache would have compiled there, and the run's report names it.
"""
from __future__ import annotations

import sys

import numpy as np
from numba.core import event
from numba.core.dispatcher import Dispatcher

from .interfaces import Command, RobotState

COMPILE_EVENT = "numba:compile"


class ScratchCycle:
    """Copies of a loop's per-cycle arrays for ``warm``: ``state`` (fresh), ``command``, the desired motion
    ``q_d``, ``qd_d``, ``qdd_d``, the control time ``t`` the run starts at and the period ``dt`` (s).
    ``loop`` is there to read its configuration (model, period, indices), not to change."""

    def __init__(self, loop):
        self.loop = loop
        self.t = loop.cycle * loop.period
        self.dt = loop.period
        self.state = RobotState(loop.model)
        self.command = Command(loop.model)
        for copy, source in ((self.state, loop.state), (self.command, loop.command)):
            for name in type(source).__slots__:
                value = getattr(source, name)
                setattr(copy, name, value.copy() if isinstance(value, np.ndarray) else value)
        self.state.fresh = True
        self.q_d, self.qd_d, self.qdd_d = loop.q_d.copy(), loop.qd_d.copy(), loop.qdd_d.copy()


def signatures(packages) -> dict:
    """``{dispatcher: frozenset of its compiled signatures}`` over the module-level numba kernels of the
    imported modules of ``packages`` (top-level package names)."""
    found = {}
    for name, module in list(sys.modules.items()):
        if name.partition(".")[0] not in packages or module is None:
            continue
        for value in list(getattr(module, "__dict__", {}).values()):
            if isinstance(value, Dispatcher) and value not in found:
                found[value] = frozenset(value.overloads)
    return found


def kernel_name(dispatcher, args) -> str:
    func = getattr(dispatcher, "py_func", None)
    name = f"{func.__module__}.{func.__qualname__}" if func is not None else repr(dispatcher)
    return f"{name}({', '.join(str(a) for a in args)})"


class KernelWatch(event.Listener):
    """The kernels first reached between :meth:`start` and :meth:`stop`, compiled or loaded from the cache.

    Two records, because each misses what the other sees: numba's compile events (every compilation,
    kernels made inside functions included, but nothing for a cache load) and the signatures each
    module-level kernel of ``packages`` holds at :meth:`start` compared with those at :meth:`stop` (a
    load from the cache adds one like a compilation does). Only the outermost of nested compilations is
    named (a kernel's callees compile with it)."""

    def __init__(self, packages=("rtctl",)):
        self.packages = frozenset(packages)
        self._before: dict = {}
        self._compiled: list[str] = []
        self._depth = 0

    def start(self) -> "KernelWatch":
        self._compiled, self._depth = [], 0
        self._before = signatures(self.packages)
        event.register(COMPILE_EVENT, self)
        return self

    def stop(self) -> list[str]:
        """The kernels (with their argument types) first reached since :meth:`start`; [] when none."""
        event.unregister(COMPILE_EVENT, self)
        late = list(self._compiled)
        for dispatcher, after in signatures(self.packages).items():
            for args in sorted(after - self._before.get(dispatcher, frozenset()), key=str):
                name = kernel_name(dispatcher, args)
                if name not in late:
                    late.append(name)
        return late

    def on_start(self, ev) -> None:
        if self._depth == 0:
            self._compiled.append(kernel_name(ev.data["dispatcher"], ev.data["args"]))
        self._depth += 1

    def on_end(self, ev) -> None:
        self._depth -= 1


def ready_kernel(kernel: Dispatcher, signature: str) -> Dispatcher:
    """``kernel`` compiled (or loaded from numba's cache) for ``signature`` and closed to other argument types,
    as ``@njit(signature)`` makes a kernel at import, but when the first component that calls it is built: the
    variants no component of a run uses (a plant's Stribeck friction step, say) are then never compiled. A call
    with other types raises TypeError (the caller converts on its slow path); it never compiles in the loop."""
    if kernel not in _READY:
        kernel.compile(signature)
        kernel.disable_compile()
        _READY.add(kernel)
    return kernel


_READY: set = set()   # the kernels ready_kernel closed
