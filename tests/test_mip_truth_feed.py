"""The plant's truth shared with the IMU emulator (hil/truth_feed.py): kinematics against the dynamics core,
the sequence lock under a writer in another process, allocation-free writes, and a block only its user opens."""
from __future__ import annotations

import gc
import multiprocessing
import os
import stat
import time
import tracemalloc
from multiprocessing import shared_memory

import numpy as np
import pytest

from rtctl.cli import load_model
from rtctl.dynamics import Dynamics
from rtctl.hil.truth_feed import ACC, OMEGA, POS, QUAT, SIZE, VEL, TruthFeed, TruthWriter
from rtctl.model import quaternion_to_matrix, rpy_to_matrix

from other_user import as_other_user


@pytest.fixture
def feed():
    f = TruthFeed.create()
    yield f
    f.close()


def test_the_block_is_0600_and_another_user_cannot_open_it(feed):
    assert feed.mode() == 0o600
    path = f"/dev/shm/{feed.name}"
    if os.path.exists(path):            # Linux: POSIX shared memory is a file in /dev/shm
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600

    def attack(name):
        outcomes = []
        for opener in (lambda: shared_memory.SharedMemory(name=name),
                       lambda: os.open(f"/dev/shm/{name}", os.O_RDONLY)):
            try:
                opener()
                outcomes.append("opened")
            except PermissionError:
                outcomes.append("refused")
        return os.getuid(), outcomes

    uid, outcomes = as_other_user(attack, feed.name)
    assert uid == 65534 and outcomes == ["refused", "refused"]


def test_a_name_someone_made_first_is_an_error_not_a_shared_block(feed):
    with pytest.raises(FileExistsError):
        TruthFeed(feed.name, _create=True)


def _write_counting(name: str, writes: int) -> None:
    f = TruthFeed(name)
    values = np.zeros(SIZE)
    for k in range(1, writes + 1):
        values[:] = k
        f.write(values)
    f.close()


def test_the_reader_never_sees_a_torn_sample(feed):
    """A writer process writes the sample k (every value k) as fast as it can; every sample this process reads
    has all its values equal, and they never go back."""
    ctx = multiprocessing.get_context("fork")
    writer = ctx.Process(target=_write_counting, args=(feed.name, 300_000))
    out = np.zeros(SIZE)
    reads, last = 0, 0.0
    writer.start()
    try:
        deadline = time.monotonic() + 60
        while writer.is_alive() and time.monotonic() < deadline:
            if feed.read(out) > 0:
                assert np.all(out == out[0]), out
                assert out[0] >= last
                last = out[0]
                reads += 1
    finally:
        writer.join(10)
    assert writer.exitcode == 0 and reads > 100
    assert feed.read(out) == 2 * 300_000 and np.all(out == 300_000)


def _arm():
    model = load_model("arm7", None)
    return model, Dynamics(model)


def test_the_written_frame_is_the_dynamics_cores_placement_and_point_velocity(feed):
    model, dyn = _arm()
    body, rot, trans = 5, rpy_to_matrix([0.3, -0.2, 1.1]), np.array([0.02, -0.05, 0.1])
    writer = TruthWriter(feed, Dynamics(model), body, rot, trans)
    rng = np.random.default_rng(5)
    out = np.zeros(SIZE)
    for _ in range(5):
        q, v = rng.uniform(-1, 1, model.nq), rng.uniform(-2, 2, model.nv)
        writer.step(0.0, q, v)
        feed.read(out)
        r_body, p_body = dyn.frame_placement(q, body)
        assert np.allclose(out[POS:POS + 3], p_body + r_body @ trans, atol=1e-12)
        assert np.allclose(quaternion_to_matrix(out[QUAT:QUAT + 4]), r_body @ rot, atol=1e-12)
        twist = dyn.jacobian(q, body, point=trans) @ v          # [angular; linear] at the point
        assert np.allclose(out[OMEGA:OMEGA + 3], twist[:3], atol=1e-12)
        assert np.allclose(out[VEL:VEL + 3], twist[3:], atol=1e-12)


def test_the_acceleration_is_the_point_acceleration_to_first_order_in_the_step(feed):
    """Constant joint accelerations: the finite difference over a step h is the classical acceleration
    J qdd + Jdot v at the step's middle, to O(h^2); measured at two steps, the error shrinks fourfold."""
    model, dyn = _arm()
    body, trans = 6, np.array([0.0, 0.0, 0.08])
    rng = np.random.default_rng(6)
    q0, v0, a = rng.uniform(-1, 1, model.nq), rng.uniform(-1, 1, model.nv), rng.uniform(-3, 3, model.nv)
    errors = []
    for h in (1e-3, 5e-4):
        writer = TruthWriter(feed, Dynamics(model), body, np.eye(3), trans)
        out = np.zeros(SIZE)
        for t in (0.2 - h, 0.2):
            writer.step(t, q0 + v0 * t + 0.5 * a * t * t, v0 + a * t)
        feed.read(out)
        tm = 0.2 - h / 2
        qm, vm = q0 + v0 * tm + 0.5 * a * tm * tm, v0 + a * tm
        exact = dyn.jacobian(qm, body, point=trans)[3:] @ a + dyn.jacobian_dot_times_v(qm, vm, body, point=trans)[3:]
        errors.append(np.linalg.norm(out[ACC:ACC + 3] - exact))
    assert errors[1] < errors[0] / 3 and errors[0] < 1e-3 * np.linalg.norm(exact)


def test_writing_a_step_keeps_no_memory(feed):
    model, _ = _arm()
    writer = TruthWriter(feed, Dynamics(model), 6, np.eye(3), np.zeros(3))
    q, v = np.zeros(model.nq), np.ones(model.nv)
    for k in range(200):
        writer.step(k * 1e-3, q, v)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for k in range(200, 5200):
        writer.step(k * 1e-3, q, v)
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert grown < 2048, grown      # 5000 steps: nothing kept per step


def test_read_at_gives_the_step_a_tick_falls_on_and_says_when_the_ring_lost_it():
    """A plant stepped at 0.3 ms (its time summed step by step, some ulps off k h) and a device ticking at 500 Hz:
    read_at(k / 500) is the newest step at or before the tick -- the step of time k/500 itself where one falls
    on it -- for every tick the ring still holds; an older tick is -1 and gives the newest sample."""
    feed = TruthFeed.create(depth=64)
    try:
        values, out, h, t = np.zeros(SIZE), np.zeros(SIZE), 3e-4, 0.0
        times = []
        for k in range(400):
            values[:] = k
            values[0] = t
            feed.write(values)
            times.append(t)
            t += h
        times = np.array(times)
        kept = times[-64:]
        for tick in range(int(kept[0] * 500) + 1, int(kept[-1] * 500) + 1):
            at = tick / 500
            step = np.flatnonzero(times <= at + 1e-9)[-1]
            assert feed.read_at(at, out) == 2 * (step + 1) and out[1] == step, (tick, at, times[step])
            if abs(times[step + 1] - at) < 1e-9 or abs(times[step] - at) < 1e-9:
                assert abs(out[0] - at) < 1e-9      # a step on the tick is the one taken, never its neighbour
        assert feed.read_at(kept[0] - h, out) == -1 and out[1] == 399     # lapped: the newest instead
        assert feed.newest_time() == times[-1]
    finally:
        feed.close()


def test_an_empty_feed_reads_nan_and_opening_a_foreign_block_is_refused():
    feed = TruthFeed.create(depth=4)
    out = np.zeros(SIZE)
    try:
        assert feed.read(out) == 0 and np.all(np.isnan(out)) and np.isnan(feed.newest_time())
        assert feed.read_at(1.0, out) == -1
    finally:
        feed.close()
    if not os.path.isdir("/dev/shm"):
        return
    name = f"rtctl-test-{os.getpid()}"       # made as a file, so that this process's resource tracker never knew it
    fd = os.open(f"/dev/shm/{name}", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.write(fd, bytes(8) + (1 << 20).to_bytes(8, "little") + bytes(48))    # a "depth" far beyond 64 bytes
        with pytest.raises(ValueError, match="not a truth feed"):
            TruthFeed(name)
    finally:
        os.close(fd)
        os.unlink(f"/dev/shm/{name}")
