"""What the EtherCAT driver and HIL tests share: an emulated line of CiA 402 drives on a veth pair inside a
network namespace the test makes (rtctl.hil.ethercat.netns), and run configs for the ``ethercat`` driver on
its other end. The loop runs in the test's process with its thread moved into the namespace
(:func:`netns.inside`): the master's raw socket, and the driver's link watch, are opened there."""
from __future__ import annotations

import contextlib
import json

from rtctl.config import build, validate
from rtctl.hil.ethercat import netns

VENDOR, PRODUCT, REVISION = 0x00000F3E, 0x00000402, 0x00010000     # the emulator's default identity
Q0 = [0.2, -0.4]                  # the driver tests' line: can_arm2's two joints from here, geared 10:1
ARM = ("--robot", "can_arm2", "--ratio", "10", "--initial", *map(str, Q0))
STALL_TOLERANT = 100              # lost frames in a row a run whose subject is not frame loss lets go (a busy machine)


@contextlib.contextmanager
def emulated_line(*args: str):
    """(namespace, process, stop) of an emulator started with ``args`` on the slave end; ``stop()`` returns
    its STATS once it ended on SIGTERM. Killed and the namespace deleted on exit."""
    with netns.veth_namespace() as ns:
        assert ns is not None
        proc = netns.start_emulator(ns, *args)
        stats = {}

        def stop() -> dict:
            if not stats:
                stats.update(json.loads(netns.stop_emulator(proc).split("STATS ", 1)[1]))
            return stats
        try:
            yield ns, proc, stop
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def run_config(robot: str, q0, amplitude, frequency, *, kp: float = 400.0, rate: float = 1000.0,
               ratio: float = 10.0, phase: float = 0.0, **driver) -> dict:
    """A computed-torque run of ``robot`` over the ``ethercat`` driver at ``rate`` Hz, sinusoids about ``q0``
    (``phase`` -pi/2: from rest at ``q0 - amplitude``)."""
    return {
        "robot": {"model": robot},
        "plant": {"initial_position": list(q0)},
        "driver": {"backend": "ethercat", "ethercat_interface": netns.MASTER_END, "vendor_id": VENDOR,
                   "product_code": PRODUCT, "revision": REVISION, "gear_ratio": ratio, **driver},
        "controller": {"type": "computed_torque", "kp": kp},
        "trajectory": {"type": "sinusoid", "center": list(q0), "amplitude": list(amplitude),
                       "frequency": list(frequency), "phase": phase},
        "loop": {"rate_hz": rate},
    }


def build_inside(ns: str, raw: dict, source: str = "ethercat.toml"):
    """The loop of ``raw`` built with this thread in ``ns`` (nothing is opened before configure)."""
    with netns.inside(ns):
        return build(validate(raw, source))


def run_inside(ns: str, loop, duration: float):
    """``loop.run(duration)`` with this thread in ``ns`` (the hardware comes up in the run)."""
    with netns.inside(ns):
        return loop.run(duration=duration)


def run_closed(ns: str, raw: dict, duration: float):
    """``raw`` built and run for ``duration`` s in ``ns``, its driver closed after (the master's socket); (loop,
    report)."""
    loop = build_inside(ns, raw)
    try:
        return loop, run_inside(ns, loop, duration)
    finally:
        loop.driver.close()
