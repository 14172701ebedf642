"""The truth a force-torque emulator is fed (rtctl.hil.wrench_feed), and the whole chain: a simulated arm in the
loop's process, its wrench at the sensor through shared memory to the Net F/T emulator in another process, RDT
over loopback back to the netft backend in the loop.

* The sequence lock: a writer in another process publishing (i, [i] * 6) as fast as it can and a reader here:
  every copy read is one write's (all seven values equal), never half of two.
* The block is 0600, and a uid-65534 child of the test (root in CI: fork + setuid) can neither read it, nor
  write it, nor remove it; a block another user made under a feed's name is refused by the reader (owner), so
  is one others may read (mode), a name that is not a feed's, and the writer never reuses a name that exists.
* End to end: arm7 held at rest by computed torque under a known wrench at its tool, paced at 1 kHz; the
  netft sensor's reading, compensated for the weight it carries and moved to the tool, is the applied wrench
  within 4 standard errors of the Gamma's noise (plus 2 counts); records taken and lost add up to at most
  those the emulator sent.
"""
from __future__ import annotations

import multiprocessing
import os
import time

import numpy as np
import pytest

from rtctl.config import build, validate
from rtctl.hil import wrench_feed
from rtctl.hil.netft_sensor import GAMMA_SI_130_10, NetFTProcess
from rtctl.hil.wrench_feed import PlantWrenchFeed, WrenchFeed, WrenchFeedReader
from rtctl.loops.wrench import WrenchProcessing

NOBODY = 65534


def writer(feed, seconds):
    end = time.monotonic() + seconds
    value, i = np.zeros(6), 0
    while time.monotonic() < end:
        i += 1
        value[:] = i
        feed.write(float(i), value)


def test_every_read_is_one_write_never_half_of_two():
    with WrenchFeed() as feed:
        reader = WrenchFeedReader(feed.name)
        child = multiprocessing.get_context("fork").Process(target=writer, args=(feed, 0.5))
        child.start()
        out, reads = np.zeros(6), 0
        while child.is_alive() or reads == 0:
            t = reader.read(out)
            if t == t:
                reads += 1
                assert np.all(out == t), (t, out)
        child.join()
        reader.close()
    assert reads > 1000 and not os.path.exists(feed.path)


def as_nobody(action) -> int:
    """Run ``action()`` in a child with uid and gid 65534: its exit status (0: it returned True)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            os._exit(0 if action() else 1)
        except BaseException:
            os._exit(2)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def refused(call) -> bool:
    try:
        call()
    except PermissionError:
        return True
    return False


@pytest.mark.skipif(os.geteuid() != 0, reason="setuid needs root (CI runs as root)")
def test_another_user_can_neither_read_nor_write_nor_remove_the_block():
    with WrenchFeed() as feed:
        assert os.stat(feed.path).st_mode & 0o777 == 0o600
        assert as_nobody(lambda: refused(lambda: os.open(feed.path, os.O_RDONLY))
                         and refused(lambda: os.open(feed.path, os.O_RDWR))
                         and refused(lambda: os.unlink(feed.path))
                         and refused(lambda: WrenchFeedReader(feed.name))) == 0
        assert os.path.exists(feed.path)


@pytest.mark.skipif(os.geteuid() != 0, reason="setuid needs root (CI runs as root)")
def test_a_block_someone_else_made_is_refused_and_never_reused(monkeypatch):
    name = wrench_feed.PREFIX + "ab" * 16
    path = os.path.join(wrench_feed.DIRECTORY, name)

    def squat():
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        os.ftruncate(fd, wrench_feed.SIZE)
        os.close(fd)
        return True
    try:
        assert as_nobody(squat) == 0
        with pytest.raises(ValueError, match=f"wrench feed {name}: owned by uid {NOBODY}, not 0"):
            WrenchFeedReader(name)
        monkeypatch.setattr(wrench_feed.secrets, "token_hex", lambda n: "ab" * n)
        with pytest.raises(FileExistsError):
            WrenchFeed()
    finally:
        os.unlink(path)


def test_a_block_others_may_read_and_a_name_not_a_feeds_are_refused():
    name = wrench_feed.PREFIX + "cd" * 16
    path = os.path.join(wrench_feed.DIRECTORY, name)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.fchmod(fd, 0o644)
        os.ftruncate(fd, wrench_feed.SIZE)
        with pytest.raises(ValueError, match="mode 644 lets others in"):
            WrenchFeedReader(name)
    finally:
        os.close(fd)
        os.unlink(path)
    for bad in ("../../etc/passwd", wrench_feed.PREFIX + "xyz", "rtctl-wrench-" + "0" * 31):
        with pytest.raises(ValueError, match="is not one this module makes"):
            WrenchFeedReader(bad)


Q0 = [0.1, 0.6, 0.0, -1.2, 0.1, 0.8, 0.2]
PUSH = np.array([0.2, -0.1, 0.3, 3.0, -5.0, 8.0])    # [n; f] about the tool frame's origin, world axes


@pytest.mark.slow
def test_a_simulated_arms_wrench_reaches_the_loop_through_the_emulated_net_ft():
    with WrenchFeed() as feed, NetFTProcess("--feed", feed.name, "--rate", "1000") as emulator:
        loop = build(validate({
            "robot": {"model": "arm7"},
            "plant": {"initial_position": Q0, "viscous_friction": 0.0, "coulomb_friction": 0.0},
            "driver": {"gear_ratio": 100.0, "rotor_inertia": 5e-6},
            "controller": {"type": "computed_torque", "kp": 400.0},
            "trajectory": {"type": "min_jerk", "goal": Q0, "duration": 0.1},
            "loop": {"rate_hz": 1000.0, "pace": True},
            "sensors": [{"backend": "netft", "name": "wrist", "frame": "tool", "mount_rpy": [0.0, 0.0, 0.4],
                         "host": "127.0.0.1", "rdt_port": emulator.rdt_port, "tcp_port": emulator.tcp_port,
                         "max_age": 0.1}]}))
        plant, sensor = loop.drivers[0].plant, loop.sensors[0]
        loop.boundary_hooks.append(PlantWrenchFeed(plant, sensor, feed))
        loop.boundary_hooks.append(lambda lp: plant.set_external_wrench("tool", PUSH))
        loop.run(duration=0.6)
        processing = WrenchProcessing(loop.model, sensor)
        target = processing.target("tool")
        processing.update(loop.state.q, target, world_axes=True)     # compiled before the run, as a hook warms
        samples = []

        def measure(cycle, t, state, command):
            if sensor.reading.fresh:
                processing.update(state.q, target, world_axes=True)
                samples.append(processing.moved.copy())
        loop.hooks.append(measure)
        loop.run(duration=0.4)
        assert not sensor.health.fault, sensor.health.fault_reason
        assert np.abs(loop.state.v).max() < 1e-4 and loop.late_kernels == []
    moved = np.array(samples)
    resolution = np.array(GAMMA_SI_130_10["resolution"])
    sigma = np.concatenate([resolution[3:], resolution[:3]])      # Fx .. Tz -> [torque; force]
    bound = 4 * sigma / np.sqrt(len(moved)) + 2e-6
    assert len(moved) >= 50          # fresh reads: fewer when the machine holds the emulator back (bursts)
    assert np.all(np.abs(moved.mean(axis=0) - PUSH) <= bound), (moved.mean(axis=0) - PUSH, bound)
    counts = sensor.counters()
    assert counts["rdt_records"] + counts["rdt_lost"] <= emulator.stats["records"]
