"""The GRM of Chen & Wang (1998) in the rtctl loop: geared plant, virtual-link computed torque through the sim driver
(coupling A^T)."""

import numpy as np
import pytest

from rtctl.config import build, load_config, bundled_config_path
from rtctl.plants.geared.model import grm3

EXAMPLE = bundled_config_path("geared")


def run(controller, gs=None, duration=2.0):
    cfg = load_config(EXAMPLE)
    cfg["controller"]["type"] = controller
    cfg["loop"]["pace"] = False
    loop = build(cfg)
    if gs is not None:
        from rtctl.plants.geared.control import GearedComputedTorque
        loop.controller = GearedComputedTorque(loop.controller.dyn, GearedComputedTorque.Options(kp=400.0), gs=gs)
    rep = loop.run(duration=duration)
    assert not rep.tripped, rep.trip_reason
    return rep, loop


def test_example_coupling_is_A_transpose():
    cfg = load_config(EXAMPLE)
    np.testing.assert_allclose(np.array(cfg["driver"]["coupling"]), grm3().A.T, atol=1e-15)


def test_plant_matches_virtual_link_forward_dynamics():
    from rtctl.plants.geared.plant import GearedPlant
    mech = grm3()
    plant = GearedPlant(mech.virtual_model("grm3"))
    d = mech.dynamics()
    rng = np.random.default_rng(3)
    q0, v0 = rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 3)
    plant.reset(q0, v0)
    tau = rng.uniform(-2, 2, 3)
    plant.step(1e-4, tau)
    a = d.forward_dynamics(q0, v0, tau)
    np.testing.assert_allclose(plant.v, v0 + 1e-4 * a, atol=1e-6)
    # Energy: unforced and frictionless, gravity-compensated motion conserves T + V.
    plant.reset(q0, v0)
    e0 = sum(plant.energy())
    for _ in range(200):
        plant.step(1e-3, np.zeros(3))
    assert abs(sum(plant.energy()) - e0) < 1e-6 * max(1.0, abs(e0))


@pytest.mark.slow
def test_coupled_computed_torque_tracks_better_than_gear_blind():
    full, loop = run("geared_computed_torque")
    blind, _ = run("computed_torque")                       # virtual EOLC only: G_s dropped (direct drive)
    diag, _ = run("geared_computed_torque", gs="diagonal")  # per-joint reflected rotor inertia, no coupling
    print("\ntracking RMS (rad) per joint")
    for name, rep in (("virtual-link CT (G_v + G_s)", full), ("CT ignoring gears (G_v)", blind),
                      ("CT with diagonal reflected inertia", diag)):
        print(f"  {name:<36}{np.array2string(rep.tracking_rms, formatter={'float_kind': lambda x: f'{x:.2e}'})}  max {rep.tracking_max.max():.2e}")
    assert np.all(full.tracking_rms < blind.tracking_rms)
    assert np.linalg.norm(full.tracking_rms) < 0.5 * np.linalg.norm(blind.tracking_rms)
    assert np.linalg.norm(full.tracking_rms) < np.linalg.norm(diag.tracking_rms)
    assert loop.driver.saturated_cycles == 0
    # the controller's motor torques are what the driver applied (xi = A^-1 tau, tau_m = A_tr^-T tau)
    np.testing.assert_allclose(loop.controller.xi, loop.driver._applied, rtol=1e-9, atol=1e-9)


@pytest.mark.slow
def test_cli_runs_example():
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "rtctl.cli", "run", str(EXAMPLE), "--offline", "--duration", "0.5"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no trips" in out.stdout
