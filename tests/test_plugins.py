"""Third-party components through entry points, without touching rtctl (the recipes of docs/architecture.md).

tests/plugin_demo is a package as a user would write it: a robot model, a plant, a driver and a
controller, advertised in its entry_points.txt. Here it is installed beside rtctl the way pip would (a
``*.dist-info`` directory on the path) and run from a TOML config by the ``rtctl`` command.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

DEMO = Path(__file__).resolve().parent / "plugin_demo"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A directory holding the demo package and its dist-info, as ``pip install`` would leave them."""
    root = tmp_path_factory.mktemp("site")
    shutil.copytree(DEMO / "rtctl_recipes_demo", root / "rtctl_recipes_demo")
    info = root / "rtctl_recipes_demo-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rtctl-recipes-demo\nVersion: 0.1\n")
    shutil.copy(DEMO / "entry_points.txt", info / "entry_points.txt")
    return root


def rtctl(site, *args, cwd=None):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", "import sys; from rtctl.cli import main; sys.exit(main())", *args],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=600)


@pytest.mark.slow
def test_plugin_robot_plant_driver_and_controller_run_from_toml(site, tmp_path):
    """The exact inverse model of the plug-in plant tracks the minimum-jerk move to round-off: with the
    plant integrated exactly and the torque held over each period, the only error is the zero-order
    hold (bounded well below 1e-4 rad at 1 kHz)."""
    config = tmp_path / "recipes.toml"
    shutil.copy(DEMO / "recipes.toml", config)
    result = rtctl(site, "run", str(config), "--offline")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "two_link_demo, rotor_inverse_demo, ideal_demo driver" in result.stdout
    rows = [line.split() for line in result.stdout.splitlines() if line.strip().startswith(("shoulder", "elbow"))]
    assert len(rows) == 2
    worst = max(float(r[2]) for r in rows)
    assert 0 < worst < 1e-4, result.stdout
    assert "safety: armed throughout" in result.stdout


@pytest.mark.slow
def test_plugin_options_are_checked_by_the_plugin_schema(site, tmp_path):
    config = tmp_path / "bad.toml"
    text = (DEMO / "recipes.toml").read_text()
    for old, new, message in (("max_effort = 10.0", "max_efort = 10.0", "[driver] unknown key 'max_efort' for "
                                                                        "driver 'ideal_demo' (did you mean 'max_effort'?)"),
                              ("inertia = 0.02\ndamping = 0.1\n\n[driver]", "inertia = -1.0\ndamping = 0.1\n\n[driver]",
                               "[plant] inertia: must be > 0, got -1.0"),
                              ('type = "rotor_inverse_demo"', 'type = "rotor_inverse_dem"',
                               "did you mean 'rotor_inverse_demo'")):
        config.write_text(text.replace(old, new, 1))
        result = rtctl(site, "run", str(config), "--offline")
        assert result.returncode != 0
        assert message in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


def test_without_the_plugin_installed_the_names_are_unknown(tmp_path):
    config = tmp_path / "recipes.toml"
    shutil.copy(DEMO / "recipes.toml", config)
    result = rtctl(tmp_path / "empty", "run", str(config), "--offline")
    assert result.returncode != 0 and "unknown" in result.stderr and "Traceback" not in result.stderr


def test_the_plugin_plant_integrates_exactly(site, monkeypatch):
    """Under a constant torque the rotor's state after one step equals the closed-form solution."""
    monkeypatch.syspath_prepend(str(site))
    from rtctl_recipes_demo.plant import RotorPlant
    from rtctl_recipes_demo.robot import two_link_demo

    plant = RotorPlant(two_link_demo(), RotorPlant.Options(inertia=0.02, damping=0.1))
    tau = np.array([0.3, -0.2])
    for _ in range(1000):
        plant.step(1e-3, tau)
    t, J, b = 1.0, 0.02, 0.1
    v_inf = tau / b
    np.testing.assert_allclose(plant.v, v_inf * (1 - np.exp(-b * t / J)), rtol=1e-12)
    np.testing.assert_allclose(plant.q, v_inf * t - v_inf * (J / b) * (1 - np.exp(-b * t / J)), rtol=1e-10)
