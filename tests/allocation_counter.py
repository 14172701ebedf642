"""Run a script with numba's runtime allocation counters on (NUMBA_NRT_STATS=1 must be set before numba
starts, hence a subprocess), from the repository root so that ``rtctl``, ``loops`` and ``plants`` import."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_with_allocation_counters(script: str, timeout: float = 600.0) -> str:
    """The script's standard output; the calling test fails with its output if it exits non-zero."""
    env = dict(os.environ, NUMBA_NRT_STATS="1")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                            timeout=timeout, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout
