"""The README runs: its TOML snippets validate, its Python runs, its commands parse (and the cheap ones run),
and every config key or section it names in backticks exists in a schema, spelt as the schema spells it."""
from __future__ import annotations

import importlib.util
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from rtctl import MODELS_DIR
from rtctl.cli import build_parser, main
from rtctl.config import COMPONENTS, CORE_SCHEMA, DEMO_CONFIG, collision_keys, read_toml, validate
from rtctl.options import schema_keys
from rtctl.registry import ROBOTS
from rtctl.plants.geared.description import MECHANISM_KEYS
from rtctl.loops.cpg import shipped_patterns
from rtctl.sweep.spec import BACKEND_KEYS, BACKENDS, METHODS
from rtctl.telemetry.schema import JOINT_FIELDS, SCALAR_FIELDS

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
FENCED = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
SWEEP_KEYS = {"base", "method", "samples", "seed", "duration", "metrics", "parameter", "path", "values", "low",
              "high", "log"}


def blocks(lang):
    return [m.group(2) for m in FENCED.finditer(README) if m.group(1) == lang]


def prose():
    return FENCED.sub("", README)


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
    return {"backend": set(BACKEND_KEYS), "sweep": SWEEP_KEYS, "mechanism": MECHANISM_KEYS}.get(section, set())


def vocabulary() -> set[str]:
    """Names a backticked word may be: keys, component names, choices, model/robot/config names."""
    words = set()
    owned = {name for sec in COMPONENTS for cls in component_classes(sec) for name in getattr(cls, "sections", {})}
    sections = [*CORE_SCHEMA, *COMPONENTS, "drivers", "backend", "sweep", "collision", *sorted(owned)]
    for section in sections:
        words |= keys_of(section)
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
    return words


def test_every_toml_block_validates_over_the_demo_config():
    base = read_toml(DEMO_CONFIG)
    snippets = blocks("toml")
    assert len(snippets) >= 3
    for text in snippets:
        snippet = tomllib.loads(text)
        merged = {**base, **snippet}
        if "drivers" in snippet:
            merged.pop("driver", None)
        validate(merged, "README snippet")


def test_the_python_block_runs():
    (code,) = blocks("python")
    namespace = {}
    exec(compile(code, "README.md", "exec"), namespace)
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
        assert keys, f"README names a section [{section}] that no schema has"
        if key is not None:
            assert key in keys, f"README: `{span}`: [{section}] has no key {key!r}; keys: {sorted(keys)}"
        checked += 1
    assert checked > 20


# Backticked words in the README that are not config words: functions, files, units, values of other kinds.
NOT_CONFIG_WORDS = {
    "load_urdf", "model_to_urdf", "inverse_dynamics", "mass_matrix", "forward_dynamics", "status", "estop",
    "rearm", "set_gains", "set_target", "set_cpg", "set_impedance", "token", "rtctl", "kp", "kd", "q", "v", "tau", "hil",
    "build", "canopen", "json", "k", "ps", "socketcan", "timestamp", "dask",
    "error", "reason", "timeout",           # a sweep row's status and its reason
    "null",                                 # an Origin header value
    "set_feedback",                         # the jaw CPG's feedback input (a method)
    "nonfinite",                            # the JSON member listing a message's NaN and infinities
    "kill", "nohup",                        # the shell's commands that signal or shield rtctl
}


def test_backticked_words_are_real_names():
    """A word like `rate` where the key is `rate_hz` is a stale name: each backticked snake_case word is a
    config key, a component or choice name, a model name, or one of the listed other names."""
    words = vocabulary() | NOT_CONFIG_WORDS
    unknown = sorted({w for w in SPAN.findall(prose()) if re.fullmatch(r"[a-z][a-z0-9_]*", w)} - words)
    assert not unknown, f"README names {unknown}, which no schema, registry or model has"


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


def test_every_rtctl_command_of_the_readme_parses():
    found = commands()
    assert len(found) >= 15
    parser = build_parser()
    for argv in found:
        if argv == ["--version"]:
            continue                    # argparse exits 0 after printing: run below
        if len(argv) == 1:              # the prose names a command (`rtctl control`): it must exist
            assert argv[0] in parser._subparsers._group_actions[0].choices, f"README: no command rtctl {argv[0]}"
            continue
        try:
            parser.parse_args(argv)
        except SystemExit as exc:
            pytest.fail(f"README command `rtctl {' '.join(argv)}` does not parse (exit {exc.code})")


def test_python_modules_and_scripts_of_the_readme_exist():
    spans = SPAN.findall(prose())
    modules = {m.group(1) for s in spans if (m := re.match(r"python -m ([\w.]+)", s))}
    scripts = {m.group(1) for s in spans if (m := re.match(r"python (benchmarks/\w+\.py)", s))}
    assert modules and scripts
    for module in modules:
        # Installed, only rtctl is on the path: a top-level `hil` or `plants` works from the repository root only.
        assert module.split(".")[0] == "rtctl", f"README: python -m {module}: not a module of the installed package"
        assert importlib.util.find_spec(module) is not None, f"README: python -m {module}: no such module"
    for script in scripts:
        assert (ROOT / script).is_file(), f"README: python {script}: no such file"


@pytest.mark.parametrize("argv", [a for a in commands() if len(a) > 1 and a[0] in ("info", "run")] + [["--version"]])
def test_the_cheap_readme_commands_run(argv, capsys):
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
