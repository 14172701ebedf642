"""Run a script with numba's runtime allocation counters on (NUMBA_NRT_STATS=1 must be set before numba
starts, hence a subprocess), from the repository root so that ``rtctl``, ``loops`` and ``plants`` import."""
import gc
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# Defined in every script run here: the one way the tests count a compiled loop's allocations.
PRELUDE = """
def allocations(cycles, *args, n=300, status=True):
    \"\"\"numba's heap allocations during cycles(1, *args) and during cycles(n, *args); with status, each call
    must return 0.\"\"\"
    from numba.core.runtime import rtsys
    counts = []
    for k in (1, n):
        before = rtsys.get_allocation_stats().alloc
        result = cycles(k, *args)
        counts.append(rtsys.get_allocation_stats().alloc - before)
        assert not status or result == 0, (k, result)
    return counts
"""


def run_with_allocation_counters(script: str, timeout: float = 600.0) -> str:
    """The script's standard output, run after :data:`PRELUDE`; the calling test fails with its output if it
    exits non-zero."""
    env = dict(os.environ, NUMBA_NRT_STATS="1")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run([sys.executable, "-c", PRELUDE + script], env=env, capture_output=True, text=True,
                            timeout=timeout, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def retained_per_cycle(loop, modules) -> list:
    """Memory that ``modules`` keep from cycle to cycle of ``loop``: 300 warm-up cycles, then windows of 400
    under tracemalloc, each ending in a full collection and a snapshot (the first window holds one-time caches
    and the live counter); what grew from the second window to the third and again to the fourth, [] when
    nothing did. A line that keeps memory per cycle grows in every window; an object that merely happened to be
    alive at one snapshot (the last cycle's status) does not grow twice."""
    for k in range(300):
        loop.step(k * loop.period)
    tracemalloc.start()
    snapshots = []
    for window in range(4):
        for k in range(300 + 400 * window, 700 + 400 * window):
            loop.step(k * loop.period)
        gc.collect()
        snapshots.append(tracemalloc.take_snapshot())
    tracemalloc.stop()
    ours = [tracemalloc.Filter(True, m.__file__) for m in modules]
    second, third, fourth = (s.filter_traces(ours) for s in snapshots[1:])
    grew = {d.traceback: d for d in third.compare_to(second, "lineno") if d.size_diff > 0}
    return [d for d in fourth.compare_to(third, "lineno") if d.size_diff > 0 and d.traceback in grew]
