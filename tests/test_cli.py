"""The ``rtctl`` command line: in-process through ``rtctl.cli.main`` and as ``python -m rtctl.cli``.

Errors in a model file must end in exit code 2 with a one-line message on
stderr naming the faulty element, never a traceback.
"""
from __future__ import annotations

import subprocess
import sys

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
    assert captured.err.startswith("rtctl: error:")
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
