"""Run a script with numba's runtime allocation counters on (NUMBA_NRT_STATS=1 must be set before numba
starts, hence a subprocess), from the repository root so that ``rtctl``, ``loops`` and ``plants`` import."""
import os
import subprocess
import sys
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
