"""What a file says is echoed in a refusal only in part (issue: the control PC is shared; files come from anyone).

The attacks: a URDF whose link name is 5 MB (each refusal that names the link carried all of it, into the
terminal, the log and the dashboard's event list), a run config whose value or key is 5 MB, and a TOML file
nested deeper than tomllib's recursion (a RecursionError that named no file). Each is one short line naming
the file, the start of the name and how long it was.
"""
from __future__ import annotations

import pytest

from rtctl.cli import main
from rtctl.options import MAX_TOML_DEPTH, SHOWN_CHARS

BIG = "L" * 5_000_000
SHOWN = f"{'L' * (SHOWN_CHARS // 2)!r}...{'L' * (SHOWN_CHARS // 2)!r} (5000000 characters)"
LIMIT = '<limit lower="-1" upper="1" effort="1" velocity="1"/>'


def joint(name, parent, child, kind="revolute"):
    return f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>{LIMIT}</joint>'


@pytest.mark.parametrize("urdf, expected", [
    (f'<robot name="r"><link name="{BIG}"/><link name="{BIG}"/></robot>', f"link {SHOWN} is defined twice"),
    (f'<robot name="r"><link name="a"/>{joint("j", "a", BIG)}</robot>',
     f"joint 'j': child link {SHOWN} is not a defined link"),
    (f'<robot name="r"><link name="a"/><link name="{BIG}"/></robot>',
     f"more than one root link (links without a parent joint): ['a', {SHOWN}]"),
    (f'<robot name="r"><link name="{BIG}"><inertial><mass value="-1"/></inertial></link></robot>',
     f"link {SHOWN} <inertial><mass>: negative mass value='-1'"),
    (f'<robot name="r"><link name="a"/><link name="b"/>{joint(BIG, "a", "b", "weird")}</robot>',
     f"joint {SHOWN}: unknown joint type 'weird'"),
    (f'<robot name="r"><link name="a"/><link name="b"/>{joint("j", "a", "b", BIG)}</robot>',
     f"joint 'j': unknown joint type {SHOWN}"),
    (f'<{BIG}/>', f"root element {SHOWN} is not <robot>"),
], ids=["twice", "undefined-child", "two-roots", "negative-mass", "joint-name", "joint-type", "root-tag"])
@pytest.mark.slow
def test_a_5_mb_name_in_a_urdf_is_shown_cut_in_its_refusal(load_error, urdf, expected):
    message = load_error(urdf)
    assert message.endswith(": " + expected), message[:300]
    assert len(message) < 400 + len(str(message.split(": ", 1)[0]))


def test_a_missing_frame_lists_the_models_names_cut():
    from rtctl.model import ModelError
    from rtctl.model.urdf import load_urdf

    names = [f"{'n' * 100}{i}" for i in range(30)]
    links = "".join(f'<link name="{n}"/>' for n in ["base", *names])
    joints = "".join(joint(f"j{i}", "base", n) for i, n in enumerate(names))
    model = load_urdf(f'<robot name="r">{links}{joints}</robot>')
    with pytest.raises(ModelError) as err:
        model.frame(BIG)
    message = str(err.value)
    assert message.startswith(f"model 'r' has no link or frame named {SHOWN}; links and frames: [")
    assert message.endswith(", ... (11 more)]") and len(message) < 2000, message[-200:]


def run_error(capsys, path) -> str:
    status = main(["run", str(path)])
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("rtctl: compil")]
    assert status == 2 and len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("body, expected", [
    (f"[loop]\nrate_hz = '{BIG}'\n", f"[loop] rate_hz: expected a number, got {SHOWN}"),
    (f"[loop]\n{BIG} = 1\n", f"[loop] unknown key {SHOWN}; allowed: ['cpus', "),
], ids=["value", "key"])
def test_a_5_mb_value_or_key_in_a_run_config_is_shown_cut(tmp_path, capsys, body, expected):
    path = tmp_path / "run.toml"
    path.write_text(body)
    line = run_error(capsys, path)
    assert line.startswith(f"rtctl run: error: {path}: {expected}") and len(line) < 1000, line[:300]


@pytest.mark.parametrize("depth", [MAX_TOML_DEPTH + 1, 5000], ids=["past-the-bound", "past-tomllibs-recursion"])
def test_a_deeply_nested_toml_is_one_line_naming_the_file(tmp_path, capsys, depth):
    path = tmp_path / "deep.toml"
    path.write_text(f"[loop]\nrate_hz = {'[' * depth}{']' * depth}\n")
    assert run_error(capsys, path) == (f"rtctl run: error: {path}: not a config rtctl reads: arrays and tables "
                                       f"nested more than {MAX_TOML_DEPTH} deep")


def test_a_toml_at_the_nesting_bound_is_read(tmp_path):
    from rtctl.options import read_toml

    path = tmp_path / "ok.toml"
    depth = MAX_TOML_DEPTH - 1                          # the document itself is the first level
    path.write_text(f"a = {'[' * depth}1{']' * depth}\n")
    value = read_toml(path)["a"]
    for _ in range(depth):
        value = value[0]
    assert value == 1
