"""An emulated sensor's emulator process seen from outside the loop process that started it (tests of the
``mip_emulated`` and ``netft_emulated`` backends): its children in /proc, and the check that a loop process
stopped or killed by a signal leaves neither its emulator nor the emulator's shared block behind."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def children(pid: int) -> list[int]:
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            out += [int(c) for c in open(f"/proc/{pid}/task/{task}/children").read().split()]
        except OSError:
            pass
    return out


def cmdline(pid: int) -> list[str]:
    try:
        return open(f"/proc/{pid}/cmdline").read().split("\0")
    except OSError:
        return []


def alive(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"    # a zombie has exited
    except OSError:
        return False


def find_emulator(loop_proc, module: str, feed_option: str, timeout: float = 120.0) -> tuple[int, str]:
    """The pid of ``loop_proc``'s child running ``module`` and the feed its ``feed_option`` names."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and loop_proc.poll() is None:
        for child in children(loop_proc.pid):
            args = cmdline(child)
            if module in args:
                return child, args[args.index(feed_option) + 1]
        time.sleep(0.05)
    raise AssertionError(f"no emulator started (run exited {loop_proc.poll()}: {loop_proc.stderr.read()[-2000:]})")


def signal_a_run(config, cwd, sig: int, wait: float, module: str, feed_option: str, sensor: str) -> None:
    """`rtctl run config` paced, the signal ``sig`` sent to its whole process group ``wait`` s after its emulator
    started, as a terminal sends one: SIGTERM stops it in order (exit 143, the report printed, the device
    still streaming to the end: the emulator, in a session of its own, did not get the signal) and its exit
    ends the emulator and unlinks the block; SIGKILL leaves both to the emulator, which sees its parent gone,
    exits and unlinks the block (within 5 s)."""
    proc = subprocess.Popen([sys.executable, "-m", "rtctl.cli", "run", str(config), "--duration", "60"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                            start_new_session=True)
    try:
        emulator, block = find_emulator(proc, module, feed_option)
        shm = f"/dev/shm/{block}"
        assert os.path.exists(shm) and alive(emulator)
        time.sleep(wait)
        assert proc.poll() is None
        os.killpg(proc.pid, sig)
        out, err = proc.communicate(timeout=60)
        if sig == signal.SIGTERM:
            assert proc.returncode == 143 and "stopped by SIGTERM" in err and "ran " in out, (out, err)
            assert f"sensor '{sensor}'" not in out + err       # the device did not fault on the way out
        else:
            assert proc.returncode == -signal.SIGKILL
        deadline = time.monotonic() + (0.0 if sig == signal.SIGTERM else 5.0)
        while (alive(emulator) or os.path.exists(shm)) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not alive(emulator), "the emulator outlived the loop process"
        assert not os.path.exists(shm), "the truth block was left in /dev/shm"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
