"""MJCF files are input from outside the process (a Menagerie download, a colleague's file, a shared folder):
the import bounds what MuJoCo is asked to expand and compile, and names the file and element when it refuses.

* Nested ``<replicate>`` counts multiply while MuJoCo *parses* (1000 x 1000 copies of one body did not finish
  parsing in two minutes); they are counted first, in the file and the files it includes.
* More than MAX_BODIES bodies, joints or geoms are refused before MuJoCo compiles them.
* ``lock_joints`` names are printable text: a name with a NUL ended at the NUL in MuJoCo's lookup, so
  ``"j\\u0000x"`` locked joint ``j``.
After a refusal the run config is one line naming the file, and a loop still runs and e-stops.
"""
from __future__ import annotations

import ctypes
import importlib.util
import time

import pytest

from rtctl.config import ConfigError, build, validate
from telemetry_helpers import make_loop

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mujoco") is None,
                                reason="the mujoco extra (rtctl[mujoco]) is not installed")

ARM = '<body name="b"><joint name="j" type="hinge"/><geom size="0.1" mass="1"/></body>'


def mjcf(worldbody: str, extra: str = "") -> str:
    return f"<mujoco>{extra}<worldbody>{ARM}{worldbody}</worldbody></mujoco>"


def replicate(n: int) -> str:
    return (f'<replicate count="{n}" euler="0 0 1"><replicate count="{n}" euler="0 0 1"><body name="r">'
            f'<joint name="rj" type="hinge"/><geom size="0.01" mass="1"/></body></replicate></replicate>')


def refused_quickly(path, match, **kw):
    from rtctl.plants.mujoco.model import MujocoModelError, load_mujoco_model

    start = time.monotonic()
    with pytest.raises(MujocoModelError) as err:
        load_mujoco_model(path, **kw)
    assert time.monotonic() - start < 3.0
    message = str(err.value)
    assert "\n" not in message and match in message, message
    return message


def test_nested_replicates_are_counted_before_mujoco_expands_them(tmp_path):
    from rtctl.plants.mujoco.model import load_mujoco_model

    ok = tmp_path / "ok.xml"
    ok.write_text(mjcf(replicate(20)))
    assert load_mujoco_model(ok)[0].nv == 401            # 20 x 20 copies and the arm: below the bound
    bomb = tmp_path / "bomb.xml"
    bomb.write_text(mjcf(replicate(1000)))
    refused_quickly(bomb, f'{bomb}: <replicate count="1000"> makes 1000000 copies')


def test_a_replicate_bomb_in_an_included_file_is_found(tmp_path):
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "inner.xml").write_text(f"<mujoco><worldbody>{replicate(1000)}</worldbody></mujoco>")
    (tmp_path / "outer.xml").write_text('<mujoco><worldbody><include file="parts/inner.xml"/></worldbody></mujoco>')
    top = tmp_path / "robot.xml"
    top.write_text(mjcf('<include file="outer.xml"/>'.replace("outer.xml", str(tmp_path / "outer.xml"))))
    refused_quickly(top, f"{tmp_path / 'parts' / 'inner.xml'}: <replicate count=\"1000\">")


def test_more_bodies_than_the_bound_are_refused_before_compiling(tmp_path):
    from rtctl.plants.mujoco.model import MAX_BODIES

    flat = tmp_path / "flat.xml"
    flat.write_text(mjcf("".join(f'<body name="x{i}"><geom size="0.01" mass="1"/></body>'
                                 for i in range(MAX_BODIES + 1))))
    refused_quickly(flat, f"{flat}: {MAX_BODIES + 3} bodies; rtctl compiles models of at most {MAX_BODIES}")


def test_a_lock_joints_name_with_a_nul_does_not_lock_another_joint(tmp_path):
    path = tmp_path / "two.xml"
    path.write_text(mjcf('<body name="c" pos="0 0 1"><joint name="k" type="hinge"/><geom size="0.1" mass="1"/></body>'))
    refused_quickly(path, "lock_joints: 'j\\x00x' is not a joint name", lock_joints=["j\x00x"])
    refused_quickly(path, "lock_joints: 'j\\n' is not a joint name", lock_joints=["j\n"])


def test_a_run_config_on_a_replicate_bomb_is_one_line_and_the_e_stop_still_works(tmp_path):
    (tmp_path / "robot.xml").write_text(mjcf(replicate(1000)))
    raw = {"robot": {"model": "robot.xml"}, "plant": {"type": "mujoco"},
           "controller": {"type": "computed_torque", "kp": 100.0},
           "trajectory": {"type": "min_jerk", "goal": [0.1], "duration": 0.05},
           "loop": {"rate_hz": 1000.0, "pace": False}}
    source = str(tmp_path / "run.toml")
    for attempt in range(2):              # the first imports the plants and controllers; the second is timed
        start = time.monotonic()
        with pytest.raises(ConfigError) as err:
            cfg = validate(raw, source)
            cfg["_dir"], cfg["_source"] = str(tmp_path), source
            build(cfg)
    assert time.monotonic() - start < 3.0
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{source}: [") and "makes 1000000 copies" in message, message
    loop = make_loop()
    assert not loop.run(cycles=10).tripped
    loop.safety.estop("after the refused model")
    assert loop.run(cycles=2).tripped and loop.safety.tripped


def test_a_bare_ampersand_does_not_hide_a_replicate_bomb_from_the_guard(tmp_path):
    """expat refuses ``model="bomb&x"``, MuJoCo reads it: the guard must not let what it cannot read through
    (30 x 30 x 30 copies took MuJoCo 7.5-25 s and 650 MB before the body count refused them)."""
    bomb = tmp_path / "bomb.xml"
    bomb.write_text(mjcf(replicate3(30)).replace("<mujoco>", '<mujoco model="bomb&x">'))
    refused_quickly(bomb, f"{bomb}: not well-formed XML (rtctl reads every file MuJoCo will before MuJoCo does): ")


def test_a_replicate_bomb_in_an_attached_model_file_is_found(tmp_path):
    """``<asset><model file>`` makes MuJoCo parse (and expand) another file whole, as ``<include>`` does."""
    (tmp_path / "inner.xml").write_text('<mujoco><worldbody><body name="ib"><geom size="0.1" mass="1"/></body>'
                                        f'{replicate3(40)}</worldbody></mujoco>')
    top = tmp_path / "robot.xml"
    top.write_text(mjcf('<body name="host"><attach model="m" body="ib" prefix="a"/></body>',
                        extra='<asset><model name="m" file="inner.xml"/></asset>'))
    refused_quickly(top, f'{tmp_path / "inner.xml"}: <replicate count="40"> makes 64000 copies')


def replicate3(n: int) -> str:
    return f'<replicate count="{n}" euler="0 0 1">{replicate(n)}</replicate>'


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS")) / 1024


def test_a_height_field_bomb_is_refused_within_the_compile_memory_bound(tmp_path):
    """No guard counts what MuJoCo allocates: a 20000 x 20000 <hfield> (one line) took 6 GB and 15 s of this
    process, a 40000 x 40000 one asks for 6.4 GB at once; MuJoCo's parse and compile run in a child process
    whose memory is bounded."""
    from rtctl.plants.mujoco.model import MAX_COMPILE_MEMORY_MB

    bomb = tmp_path / "hfield.xml"
    bomb.write_text(mjcf('<geom type="hfield" hfield="h"/>',
                         extra='<asset><hfield name="h" nrow="40000" ncol="40000" size="1 1 1 1"/></asset>'))
    before = rss_mb()
    message = refused_quickly(bomb, f"{bomb}: MuJoCo's compile failed (")
    assert message.endswith(f"(rtctl runs it in a child process of at most {MAX_COMPILE_MEMORY_MB} MB and 60 s "
                            f"of CPU)"), message
    assert rss_mb() - before < 100


@pytest.mark.slow
def test_a_flexcomp_grid_bomb_is_stopped_at_the_compile_cpu_bound(tmp_path, monkeypatch):
    """A 100 x 100 <flexcomp> grid (10000 bodies) took MuJoCo 18.6 s to parse before the body count could refuse
    it; with a 1 s bound it is stopped after 1 s of CPU, whatever the machine's load."""
    from rtctl.plants.mujoco import model

    monkeypatch.setattr(model, "MAX_COMPILE_CPU_S", 1)
    bomb = tmp_path / "flex.xml"
    bomb.write_text(mjcf('<flexcomp name="f" type="grid" count="100 100 1" spacing=".1 .1 .1" dim="2" '
                         'radius=".01" dof="full"><edge equality="false"/></flexcomp>'))
    with pytest.raises(model.MujocoModelError) as err:
        model.load_mujoco_model(bomb)
    assert str(err.value) == (f"{bomb}: MuJoCo's compile took more than 1 s of CPU (rtctl runs it in a child "
                              f"process of at most {model.MAX_COMPILE_MEMORY_MB} MB and 1 s of CPU)")


def segfault():
    ctypes.string_at(0)


def test_a_crash_while_compiling_is_a_refusal_not_the_end_of_this_process():
    """Without the memory bound a 100000 x 100000 <hfield> crashed MuJoCo (SIGSEGV), and the process with it."""
    from rtctl.plants.mujoco.bounded import BoundExceeded, run_bounded

    with pytest.raises(BoundExceeded, match="^crashed: SIGSEGV$"):
        run_bounded(segfault, memory_mb=100, cpu_s=5, wall_s=30)
    assert run_bounded(sum, (1, 2), memory_mb=100, cpu_s=5, wall_s=30) == 3
