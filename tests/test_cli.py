"""The ``rtctl`` command line: in-process through ``rtctl.cli.main`` and as ``python -m rtctl.cli``.

Errors in a model file must end in exit code 2 with a one-line message on
stderr naming the faulty element, never a traceback.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import rtctl
from rtctl.cli import main

ARM7_JOINTS = [f"joint{i}" for i in range(1, 8)]

# A two-link arm whose elbow joint has lower > upper.
BAD_LIMIT_URDF = """<robot name="bad_arm">
  <link name="base"/>
  <link name="forearm"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01"/></inertial></link>
  <joint name="elbow" type="revolute">
    <parent link="base"/><child link="forearm"/>
    <limit lower="2" upper="-2" effort="1" velocity="1"/>
  </joint>
</robot>
"""


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "rtctl.cli", *args], capture_output=True, text=True, timeout=60)


@pytest.fixture
def bad_urdf(tmp_path):
    path = tmp_path / "bad_arm.urdf"
    path.write_text(BAD_LIMIT_URDF)
    return path


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"rtctl {rtctl.__version__}"


def test_version_from_a_subprocess():
    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"rtctl {rtctl.__version__}"


def test_info_arm7_reports_seven_dof_and_every_joint(capsys):
    assert main(["info", "arm7"]) == 0
    out = capsys.readouterr().out
    assert "nv (DOF) = 7" in out
    for name in ARM7_JOINTS:
        assert f"'{name}'" in out


def test_info_quadruped_with_free_flyer_reports_nv_18(capsys):
    assert main(["info", "quadruped12", "--floating-base", "free_flyer"]) == 0
    out = capsys.readouterr().out
    assert "nq = 19, nv (DOF) = 18" in out and "free_flyer" in out


def test_info_quadruped_fixed_base_reports_nv_12(capsys):
    assert main(["info", "quadruped12"]) == 0
    assert "nv (DOF) = 12" in capsys.readouterr().out


def test_info_accepts_a_urdf_path(capsys):
    assert main(["info", str(rtctl.bundled_model_path("arm7"))]) == 0
    assert "model 'arm7'" in capsys.readouterr().out


def test_info_malformed_urdf_exits_2_naming_file_and_joint(capsys, bad_urdf):
    assert main(["info", str(bad_urdf)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("rtctl info: error:")
    assert str(bad_urdf) in captured.err and "joint 'elbow'" in captured.err
    assert "Traceback" not in captured.err


def test_info_malformed_urdf_from_a_subprocess_has_no_traceback(bad_urdf):
    result = run_cli("info", str(bad_urdf))
    assert result.returncode == 2
    assert str(bad_urdf) in result.stderr and "joint 'elbow'" in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_info_missing_urdf_file_exits_2_naming_the_path(capsys, tmp_path):
    path = tmp_path / "nowhere.urdf"
    assert main(["info", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "Traceback" not in err


def test_info_unknown_bundled_model_exits_2_listing_known_models(capsys):
    assert main(["info", "hexapod"]) == 2
    err = capsys.readouterr().err
    assert "'hexapod'" in err and "arm7" in err and "quadruped12" in err


def test_info_on_a_long_serial_chain_does_not_crash(capsys, tmp_path):
    links = ['<link name="l0"/>']
    for i in range(1, 1500):
        links.append(f'<link name="l{i}"/><joint name="j{i}" type="continuous">'
                     f'<parent link="l{i - 1}"/><child link="l{i}"/></joint>')
    path = tmp_path / "rope.urdf"
    path.write_text('<robot name="rope">' + "".join(links) + "</robot>")
    assert main(["info", str(path)]) == 0


# -- demo and run ------------------------------------------------------------------------------------


def test_demo_runs_offline_and_reports_tracking_timing_and_safety(capsys):
    assert main(["demo", "--offline", "--duration", "1"]) == 0
    out = capsys.readouterr().out
    assert "tracking error" in out and "joint7" in out
    assert "loop timing" in out and "p99" in out
    assert "safety: armed throughout, no trips" in out


def _write_config(tmp_path, extra: str) -> str:
    text = (Path(rtctl.__file__).parent / "data" / "configs" / "demo.toml").read_text() + extra
    path = tmp_path / "run.toml"
    path.write_text(text)
    return str(path)


def test_the_overrun_warning_is_printed_once(tmp_path, capsys):
    """A 20 kHz demo cannot keep its 50 us period (a cycle computes for about 70 us): the warning is in the
    report once, not repeated on stderr."""
    path = _write_config(tmp_path, "")
    Path(path).write_text(Path(path).read_text().replace("rate_hz = 1000.0", "rate_hz = 20000.0"))
    assert main(["run", path, "--duration", "0.05"]) == 0
    captured = capsys.readouterr()
    assert (captured.out + captured.err).count("overran their 0.05 ms period") == 1, captured


def test_run_exits_non_zero_when_the_safe_state_trips_unexpectedly(tmp_path, capsys):
    # The plant 20x heavier than the controller believes: it falls faster than its velocity limit.
    path = _write_config(tmp_path, "")
    text = Path(path).read_text().replace('type = "rigid_body"', 'type = "rigid_body"\nmass_scale = 20.0')
    Path(path).write_text(text)
    assert main(["run", path, "--offline", "--duration", "1"]) == 3
    captured = capsys.readouterr()
    assert "SAFE STATE: tripped (velocity limit" in captured.out
    assert "tripped unexpectedly" in captured.err


def test_a_move_faster_than_the_joint_limits_is_refused_at_load_naming_the_joint(tmp_path, capsys):
    """The demo's 2 s move within 5 % of the URDF's velocity limits: joint4 moves 1.0 rad, peaking at
    1.875 * 1.0 / 2 = 0.94 rad/s > 0.05 * 2.27 rad/s."""
    path = _write_config(tmp_path, "")
    text = Path(path).read_text().replace("watchdog_cycles = 5", "watchdog_cycles = 5\nvelocity_scale = 0.05")
    Path(path).write_text(text)
    assert main(["run", path, "--offline", "--duration", "1"]) == 2
    err = capsys.readouterr().err
    assert "[trajectory] min_jerk: joint 'joint1'" in err and "above its velocity limit" in err


def test_goal_and_initial_position_outside_the_soft_limits_are_refused_at_load(tmp_path, capsys):
    path = _write_config(tmp_path, "")
    text = Path(path).read_text()
    Path(path).write_text(text.replace("goal = [0.6, 0.5, -0.4, -1.0", "goal = [0.6, 0.5, -0.4, -2.08"))
    assert main(["run", path, "--offline", "--duration", "1"]) == 2
    err = capsys.readouterr().err
    assert "[trajectory] goal: joint 'joint4' = -2.08 rad outside its soft limits [-2.04, 2.04]" in err
    Path(path).write_text(text.replace("initial_position = [0, 0, 0, 0, 0, 0, 0]",
                                       "initial_position = [0, 0, 0, 0, 0, 3.0, 0]"))
    assert main(["run", path, "--offline", "--duration", "1"]) == 2
    assert "[plant] initial_position: joint 'joint6' = 3 rad outside its soft limits" in capsys.readouterr().err


def test_integers_beyond_64_bit_in_a_config_are_refused_naming_the_key(tmp_path, capsys):
    path = _write_config(tmp_path, "")
    text = Path(path).read_text().replace("watchdog_cycles = 5", "watchdog_cycles = 9223372036854775808")
    Path(path).write_text(text)
    assert main(["run", path]) == 2
    err = capsys.readouterr().err
    assert "[safety] watchdog_cycles: integer out of the 64-bit range" in err and "Traceback" not in err


def test_run_reports_a_bad_config_key_and_exits_2(tmp_path, capsys):
    path = _write_config(tmp_path, "\n[extra]\nfoo = 1\n")
    assert main(["run", path]) == 2
    err = capsys.readouterr().err
    assert "unknown section [extra]" in err and "run.toml" in err


def test_unpermitted_realtime_settings_are_reported_once_and_the_loop_runs(capsys):
    from rtctl.config import build, load_config
    from rtctl.rt.realtime import RealtimeSettings

    loop = build(load_config(Path(rtctl.__file__).parent / "data" / "configs" / "demo.toml"))
    loop.realtime = RealtimeSettings(cpus=[100_000], disable_gc=True)  # no such CPU: cannot be applied
    report = loop.run(cycles=50)
    out = capsys.readouterr().out
    assert out.count("NOT applied: CPU affinity [100000]") == 1
    assert report.cycles == 50 and not report.tripped


def test_compiling_is_announced_with_a_count_and_cache_hits_are_silent():
    """A run that compiles (the first one compiles every kernel, about a minute) says so and why instead of
    going silent."""
    import io

    import numba
    from numba import njit

    from rtctl.cli import CompileProgress

    namespace = {"__name__": "rtctl.compile_probe"}
    exec("def square_plus_one(x):\n    return x * x + 1.0\n", namespace)
    kernel = njit(namespace["square_plus_one"])
    out = io.StringIO()
    with CompileProgress(out):
        assert kernel(3.0) == 10.0
        assert kernel(2.0) == 5.0                   # same signature: no second compile
        assert njit(lambda x: x)(1) == 1            # not an rtctl function: not counted
    lines = out.getvalue().splitlines()
    assert lines[0] == ("rtctl: compiling numba kernels (not in the cache yet, or their module or one it imports "
                        f"changed; cached in {numba.config.CACHE_DIR}); `rtctl warm` compiles every bundled "
                        "config's ahead, one config per core")
    assert lines[-1].startswith("rtctl: compiled 1 kernel in ")
    assert lines[-1].endswith("s; later runs load them from the cache until they or the modules they import change")
    silent = io.StringIO()
    with CompileProgress(silent):
        kernel(4.0)
    assert silent.getvalue() == ""


@pytest.mark.parametrize("robot", ["stewart", "jaw"])
def test_info_on_a_parallel_mechanism_gives_its_closed_chains_mass(capsys, robot):
    """The Stewart platform and the jaw robot run as six massless leg joints; the mass those move is the
    closed chain of the paper's model (Lopes 2009, Table 2; Kalani et al. 2018, both platforms), not 0 kg,
    and their forward dynamics is the mechanism's, so no leg is reported as a massless subtree that raises."""
    from rtctl.plants.jaw.model import JAW_PARAMETERS, ROBOT_PARAMETERS
    from rtctl.plants.stewart.model import TABLE2

    sets = [TABLE2] if robot == "stewart" else [ROBOT_PARAMETERS, JAW_PARAMETERS]
    mass = sum(p["m_P"] + 6 * p["m_C"] + 6 * p["m_S"] for p in sets)
    assert main(["info", robot]) == 0
    out = capsys.readouterr().out
    assert f"total mass: {mass:.6g} kg, of the closed chain the joints move" in out
    assert "massless subtrees" not in out and "raises" not in out
    assert f"(the closed chain's: {mass:.4g} kg)" in out


@pytest.mark.slow
def test_a_warning_during_a_run_is_one_line_without_pythons_internals(tmp_path):
    """A robot file whose hand has izz > ixx + iyy loads as written (the default inertia policy) with an
    InertiaWarning; the run says so as rtctl's warning (its one line, then the links it lists), not with
    Python's file:line, category and source line."""
    limit = '<limit lower="-2" upper="2" effort="50" velocity="3"/>'
    inertial = '<inertial><mass value="1.0"/><inertia ixx="{0}" iyy="{0}" izz="{1}" ixy="0" ixz="0" iyz="0"/>' \
               '</inertial>'
    (tmp_path / "arm.urdf").write_text(
        '<robot name="arm"><link name="base"/>'
        f'<link name="upper">{inertial.format(0.01, 0.01)}</link><link name="hand">{inertial.format(0.01, 0.05)}</link>'
        f'<joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/><axis xyz="0 1 0"/>{limit}'
        '</joint><joint name="elbow" type="revolute"><parent link="upper"/><child link="hand"/>'
        f'<origin xyz="0 0 0.3"/><axis xyz="0 1 0"/>{limit}</joint></robot>')
    (tmp_path / "run.toml").write_text('[robot]\nmodel = "arm.urdf"\n[controller]\ntype = "computed_torque"\n'
                                       '[trajectory]\ntype = "min_jerk"\ngoal = [0.2, 0.3]\nduration = 0.5\n')
    result = subprocess.run([sys.executable, "-m", "rtctl.cli", "run", str(tmp_path / "run.toml"), "--duration",
                             "0.05", "--offline"], capture_output=True, text=True, timeout=600)   # may compile first
    assert result.returncode == 0, result.stderr
    assert f"rtctl run: warning: {tmp_path / 'arm.urdf'}: 1 link with a physically inconsistent inertia" \
           in result.stderr and "\n  link 'hand': principal moments" in result.stderr, result.stderr
    assert "warnings.warn" not in result.stderr and "Warning:" not in result.stderr and ".py:" not in result.stderr
