"""The shared sample ring between the loop's process and the telemetry publisher process.

One shared mapping holds :data:`HEADER_WORDS` int64 words (word 0 counts the samples handed off) and then
``capacity`` rows of the telemetry :class:`~.schema.Layout`. The loop copies each cycle's sample into the next
row with :func:`handoff` (compiled, allocation-free); the publisher process maps the same memory with
:func:`ring_views` and reads the rows behind the counter.
"""
from __future__ import annotations

import mmap
import os
import tempfile

import numpy as np
from numba import njit

HEADER_WORDS = 8         # int64 words before the ring rows in the shared mapping; word 0 counts hand-offs


@njit("void(float64[:, ::1], int64[::1], float64[::1], float64[::1], float64[::1], int64[:, ::1], float64[::1], "
      "float64[::1], float64[::1], float64[::1], float64[::1], float64[::1], float64[::1])", cache=True)
def handoff(ring, counter, scalars, q, v, index, q_d, qd_d, effort_cmd, effort, kp, kd, extra):
    """Copy one sample into the next ring row; ``counter[0]`` counts samples handed off."""
    cap = ring.shape[0]
    row = ring[counter[0] % cap]
    ns = scalars.shape[0]
    for i in range(ns):
        row[i] = scalars[i]
    n = index.shape[1]
    c = ns
    for j in range(n):
        qi, vi = index[0, j], index[1, j]
        row[c + j] = q[qi]
        row[c + n + j] = v[vi]
        row[c + 2 * n + j] = q_d[j]
        row[c + 3 * n + j] = qd_d[j]
        row[c + 4 * n + j] = effort_cmd[vi]
        row[c + 5 * n + j] = effort[vi]
        row[c + 6 * n + j] = q_d[j] - q[qi]
        row[c + 7 * n + j] = kp[j]
        row[c + 8 * n + j] = kd[j]
    c += 9 * n
    for j in range(extra.shape[0]):
        row[c + j] = extra[j]
    counter[0] += 1


def ring_views(shared, capacity: int, width: int):
    """The counter (``int64[1]``) and the ring (``float64[capacity, width]``) in a shared mapping."""
    counter = np.frombuffer(shared, dtype=np.int64, count=1)
    ring = np.frombuffer(shared, dtype=np.float64, count=capacity * width, offset=8 * HEADER_WORDS)
    return counter, ring.reshape(capacity, width)


def map_shared(size: int):
    """``(mapping, fd, path, folder)``: a shared mapping of ``size`` bytes, its memory reserved now (a full
    shared-memory file system is an error here, not a SIGBUS in the loop later). Backed by an anonymous memory
    file (Linux ``memfd_create``: it has no name, so nothing can open it and nothing is left behind, whoever
    dies; ``fd`` is its descriptor, to hand to the publisher process, then close); elsewhere by a file ``path``
    in a new private ``folder``, to remove (:func:`remove_shared`) once the publisher process has mapped it."""
    fd = path = folder = None
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("rtctl-telemetry-ring", getattr(os, "MFD_CLOEXEC", 0))
    else:
        base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        folder = tempfile.mkdtemp(prefix="rtctl-telemetry-", dir=base)  # mode 0700
        path = os.path.join(folder, "ring")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        if hasattr(os, "posix_fallocate"):
            os.posix_fallocate(fd, 0, size)
        else:
            os.ftruncate(fd, size)
        shared = mmap.mmap(fd, size)
    except OSError as exc:
        os.close(fd)
        remove_shared(None, path, folder)
        raise RuntimeError(f"telemetry: cannot reserve {size} bytes of shared memory for the ring: {exc}") from None
    if path is not None:
        os.close(fd)
        fd = None
    return shared, fd, path, folder


def remove_shared(fd, path, folder) -> None:
    """Close the mapping's descriptor and remove its file and folder (each when there is one)."""
    if fd is not None:
        os.close(fd)
    if path:
        for remove, target in ((os.unlink, path), (os.rmdir, folder)):
            try:
                remove(target)
            except OSError:
                pass
