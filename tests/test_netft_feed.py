"""The truth a force-torque emulator is fed (rtctl.hil.wrench_feed, a truth feed of the plant time and the
wrench), and the whole chain: a simulated arm in the loop's process, its wrench at the sensor through shared
memory to the Net F/T emulator in another process, RDT over loopback back to the netft backend in the loop.

* The sequence lock: a writer in another process publishing (i, [i] * 6) as fast as it can and a reader here:
  every copy read is one write's (all seven values equal), never half of two.
* The block is 0600, and a uid-65534 child of the test (tests/other_user.py) can neither read it, nor write
  it, nor remove it; a block another user made under a feed's name is refused by the reader (owner), so is one
  others may read (mode), one that is no wrench feed (its width) and a name no block may have, and the writer
  never reuses a name that exists.
* Any block under a feed's name -- its header words (sequence, depth, width) and size drawn at random -- is
  either refused with one ValueError line or opened with its ring inside the block, and reads from it.
* End to end: arm7 held at rest by computed torque under a known wrench at its tool, paced at 1 kHz; the
  netft sensor's reading, compensated for the weight it carries and moved to the tool, is the applied wrench
  within 4 standard errors of the Gamma's noise (plus 2 counts); records taken and lost add up to at most
  those the emulator sent.
"""
from __future__ import annotations

import multiprocessing
import os
import time
from contextlib import closing
from multiprocessing import shared_memory

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rtctl.config import build, validate
from rtctl.hil import truth_feed
from rtctl.hil.netft_sensor import GAMMA_SI_130_10, NetFTProcess
from rtctl.hil.truth_feed import TruthFeed
from rtctl.hil.wrench_feed import WIDTH, PlantWrenchFeed, create_feed, open_feed
from rtctl.loops.wrench import WrenchProcessing

from other_user import NOBODY, as_other_user


def writer(name, seconds):
    feed = open_feed(name)
    end = time.monotonic() + seconds
    value, i = np.zeros(WIDTH), 0
    while time.monotonic() < end:
        i += 1
        value[:] = i
        feed.write(value)
    feed.close()


def test_every_read_is_one_write_never_half_of_two():
    feed = create_feed()
    try:
        reader = open_feed(feed.name)
        child = multiprocessing.get_context("fork").Process(target=writer, args=(feed.name, 0.5))
        child.start()
        out, reads = np.zeros(WIDTH), 0
        while child.is_alive() or reads == 0:
            if reader.read(out) > 0:
                reads += 1
                assert np.all(out == out[0]), out
        child.join()
        reader.close()
    finally:
        feed.close()
    assert reads > 1000 and not os.path.exists(f"/dev/shm/{feed.name}")


def refused(call) -> bool:
    try:
        call()
    except PermissionError:
        return True
    return False


def attack(name: str) -> list[bool]:
    path = f"/dev/shm/{name}"
    return [refused(lambda: os.open(path, os.O_RDONLY)), refused(lambda: os.open(path, os.O_RDWR)),
            refused(lambda: os.unlink(path)), refused(lambda: shared_memory.SharedMemory(name=name))]


def test_another_user_can_neither_read_nor_write_nor_remove_the_block():
    feed = create_feed()
    try:
        assert feed.mode() == 0o600 and os.stat(f"/dev/shm/{feed.name}").st_mode & 0o777 == 0o600
        assert as_other_user(attack, feed.name) == [True] * 4
        assert os.path.exists(f"/dev/shm/{feed.name}")
    finally:
        feed.close()


def squat(name: str, mode: int, size: int) -> bool:
    fd = os.open(f"/dev/shm/{name}", os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)
    os.fchmod(fd, mode)
    os.ftruncate(fd, size)
    os.close(fd)
    return True


def test_a_block_someone_else_made_is_refused_and_never_reused(monkeypatch):
    name = "rtctl-truth-" + "ab" * 8
    size = create_feed_size()
    try:
        assert as_other_user(squat, name, 0o666, size)
        with pytest.raises(ValueError, match=f"shared memory '{name}' is owned by uid {NOBODY}, not {os.geteuid()}"):
            open_feed(name)
        monkeypatch.setattr(truth_feed.secrets, "token_hex", lambda n: "ab" * n)
        with pytest.raises(FileExistsError):
            create_feed()
    finally:
        os.unlink(f"/dev/shm/{name}")


def create_feed_size() -> int:
    feed = create_feed()
    size = feed.shm.size
    feed.close()
    return size


def test_a_block_others_may_read_one_no_wrench_feed_and_a_name_no_block_has_are_refused():
    name = "rtctl-truth-" + "cd" * 8
    squat(name, 0o644, create_feed_size())
    try:
        with pytest.raises(ValueError, match="has mode 644: it lets others in"):
            open_feed(name)
    finally:
        os.unlink(f"/dev/shm/{name}")
    imu = TruthFeed.create()
    try:
        with pytest.raises(ValueError, match="is not a wrench feed \\(20 values a sample, not 7\\)"):
            open_feed(imu.name)
    finally:
        imu.close()
    for bad in ("../../etc/passwd", "rtctl-truth-" + "0" * 15):
        with pytest.raises(OSError):
            open_feed(bad)


@settings(max_examples=200, deadline=None)
@given(header=st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 400) | st.integers(0, 2**64 - 1),
                        st.just(WIDTH) | st.integers(0, 2**64 - 1)), extra=st.integers(0, 8 * WIDTH * 400))
def test_a_block_with_any_header_is_refused_in_one_line_or_read_within_its_bounds(header, extra):
    name = "rtctl-truth-" + os.urandom(8).hex()
    fd = os.open(f"/dev/shm/{name}", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, np.array(header, dtype=np.uint64).tobytes() + bytes(extra))
        try:
            feed = open_feed(name)
        except ValueError as exc:
            assert "\n" not in str(exc) and name in str(exc)
            return
        try:
            assert feed.width == WIDTH and 24 + feed.ring.nbytes <= feed.shm.size
            out = np.zeros(WIDTH)
            assert feed.read(out) >= -1 and feed.read_at(0.0, out) >= -1
        finally:
            feed.close()
    finally:
        os.close(fd)
        os.unlink(f"/dev/shm/{name}")


Q0 = [0.1, 0.6, 0.0, -1.2, 0.1, 0.8, 0.2]
PUSH = np.array([0.2, -0.1, 0.3, 3.0, -5.0, 8.0])    # [n; f] about the tool frame's origin, world axes


@pytest.mark.slow
def test_a_simulated_arms_wrench_reaches_the_loop_through_the_emulated_net_ft():
    with closing(create_feed()) as feed, NetFTProcess("--feed", feed.name, "--rate", "1000") as emulator:
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
