"""The README's HIL commands and configs run together as written, for each bus.

Each ```sh block of the README that starts an ``rtctl-hil`` piece and ends in ``rtctl run NAME.toml`` (its
"Your hardware" section: one worked example per bus) is run line by line: every ``rtctl-hil``
line starts its process (``python -m rtctl.hil.cli``, the console script's ``main``) and is waited for (the
bus server's URL, the CAN emulator's ``READY``, the Dynamixel emulator's ``PORT``); then ``rtctl run`` runs the
```toml block headed ``# NAME.toml`` as a file. Two things differ from the text, as the README says: the CAN
bus server's port 47100 is replaced by a free one (other runs may hold it), and the Dynamixel config's port
``/dev/pts/N`` by the pty the emulator printed. The run must end cleanly (exit 0, no trip) and track within
the bounds the HIL suite states for these loops (tests/hil/test_can_hil.py: 0.15 rad, 0.25 rad when the machine
made the loop overrun; tests/hil/test_dynamixel_hil.py: 0.05 rad, 0.08 rad likewise); each joint's max tracking
error is read from the run's report.
"""
from __future__ import annotations

import re
import shlex
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from rtctl.config import build, validate
from rtctl.hil import can_emulator, dynamixel_emulator
from rtctl.hil.can_harness import _finish, _wait_line

from machine import STARVED_SHARE

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
FENCED = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
README_PORT = "47100"
READY = {"can-bus": lambda s: s.startswith("ws://127.0.0.1:"), "can-emulator": lambda s: s == "READY",
         "dynamixel-emulator": lambda s: s.startswith("PORT ")}
BOUNDS = {"dynamixel": (0.05, 0.08), "can_mit": (0.15, 0.25), "cia402": (0.15, 0.25)}


def hil_recipes() -> dict[str, tuple[list[list[str]], str]]:
    """``{config name: (the rtctl-hil command lines, the config text)}`` from the README."""
    blocks = [(m.group(1), m.group(2)) for m in FENCED.finditer(README)]
    configs = {text.splitlines()[0][2:].strip(): text for lang, text in blocks
               if lang == "toml" and text.startswith("# ") and text.splitlines()[0].endswith(".toml")}
    recipes = {}
    for lang, text in blocks:
        lines = [shlex.split(line.split("#")[0].rstrip().rstrip("&")) for line in text.splitlines()]
        lines = [argv for argv in lines if argv]
        if lang == "sh" and lines and lines[0][0] == "rtctl-hil" and lines[-1][:2] == ["rtctl", "run"]:
            name = lines[-1][2]
            assert name in configs, f"README: `rtctl run {name}`: no ```toml block headed '# {name}'"
            assert all(argv[0] == "rtctl-hil" for argv in lines[:-1]), lines
            recipes[name] = (lines[:-1], configs[name])
    return recipes


RECIPES = hil_recipes()


def free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def run_recipe(name: str, tmp_path, edit=lambda text: text) -> tuple[int, str, str, str]:
    """Start the recipe's processes, run its config (after ``edit``); (status, stdout, stderr, backend)."""
    commands, config = RECIPES[name]
    port = free_port()
    config = config.replace(README_PORT, port)
    started = []
    try:
        for argv in commands:
            argv = [a.replace(README_PORT, port) for a in argv]
            proc = subprocess.Popen([sys.executable, "-m", "rtctl.hil.cli", *argv[1:]], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, cwd=tmp_path)
            started.append(proc)
            line = _wait_line(proc, READY[argv[1]], " ".join(argv), 120.0)
            if line.startswith("PORT "):
                config = config.replace("/dev/pts/N", line.split()[1])
        (tmp_path / name).write_text(edit(config))
        done = subprocess.run([sys.executable, "-m", "rtctl.cli", "run", name], capture_output=True, text=True,
                              cwd=tmp_path, timeout=300)
    finally:
        for proc in reversed(started):
            _finish(proc)
    backend = validate(tomllib.loads(config))["driver"]["backend"]
    return done.returncode, done.stdout, done.stderr, backend


def skip_if_starved(report: str, what: str) -> None:
    """The HIL suite's rule (tests/machine.py), read from the run's report: skip when more than STARVED_SHARE of
    the cycles overran and most of them woke up late with their work fitting the period."""
    late = re.search(r"(\d+) of (\d+) cycles \([\d.]+ %\) overran.*?(\d+) of its \d+ late cycles woke up late",
                     report)
    if late and int(late[1]) > STARVED_SHARE * int(late[2]) and 2 * int(late[3]) > int(late[1]):
        pytest.skip(f"{what}: the machine starved the loop in this run: {late[0]}")


def tracking_max(report: str) -> list[float]:
    table = report.split("tracking error (rad or m)")[1].split("\n\n")[0]
    return [float(line.split()[-1]) for line in table.strip().splitlines()[1:]]


def test_the_readme_has_a_recipe_per_bus():
    backends = {validate(tomllib.loads(text))["driver"]["backend"] for _, text in RECIPES.values()}
    assert backends == set(BOUNDS), sorted(RECIPES)


@pytest.mark.flaky(reruns=1, reruns_delay=1)
@pytest.mark.parametrize("name", sorted(RECIPES))
@pytest.mark.slow
def test_the_readme_emulator_and_config_run_together(name, tmp_path):
    status, out, err, backend = run_recipe(name, tmp_path)
    print(out, err)
    skip_if_starved(out, f"the README's {name} at 500 Hz")
    assert status == 0, (out, err)
    assert "safety: armed throughout, no trips" in out and "Traceback" not in err, (out, err)
    cycles = int(re.search(r"ran (\d+) cycles", out).group(1))
    overruns = int(re.search(r"overruns: (\d+)", out).group(1))
    clean, loaded = BOUNDS[backend]
    bound = clean if overruns < 0.1 * cycles else loaded
    errors = tracking_max(out)
    assert len(errors) == 2 and max(errors) < bound, (errors, bound, out)


@pytest.mark.slow
def test_the_readme_cia402_recipe_with_gear_ratio_1_is_refused_in_one_line(tmp_path):
    """The README's CAN snippet said gear_ratio = 1.0; against the emulator's 10:1 drives that ran 10x off."""
    status, out, err, _ = run_recipe("cia402.toml", tmp_path, lambda text: text.replace("gear_ratio = 10.0",
                                                                                         "gear_ratio = 1.0"))
    lines = [line for line in err.strip().splitlines() if not line.startswith("rtctl: compil")]
    assert status != 0 and len(lines) == 1, (out, err)
    assert "node 1: the drive's gear ratio 0x6091 is 10:1" in lines[0] and "gear_ratio is 1:" in lines[0], err


@pytest.mark.parametrize("emulator", [can_emulator, dynamixel_emulator], ids=["can", "dynamixel"])
def test_each_emulators_default_robot_is_named_in_a_run_config(emulator):
    """``[robot] model`` takes the name the emulator's ``--robot`` defaults to, and both mean the same arm."""
    loop = build(validate({"robot": {"model": emulator.DEFAULT_ROBOT},
                           "controller": {"type": "computed_torque", "kp": 100.0},
                           "trajectory": {"type": "sinusoid", "center": [0.0, 0.0], "amplitude": [0.1, 0.1],
                                          "frequency": [1.0, 1.0]}}))
    if emulator is can_emulator:
        plant, _ = can_emulator.build_plant(emulator.DEFAULT_ROBOT, None, None)
        emulated = plant.model
    else:
        emulated = dynamixel_emulator.load_robot(emulator.DEFAULT_ROBOT, None)
    assert loop.model.name == emulated.name and loop.model.joint_names == emulated.joint_names
    assert list(loop.model.mass) == list(emulated.mass) and emulated.nv == 2
