"""Config schemas declared next to the code they configure.

A component (driver, plant, controller, trajectory; see :mod:`rtctl.registry`) declares the keys of its
TOML table as a dataclass ``Options`` whose fields are :func:`setting` s, each key once, with its default::

    @dataclass(frozen=True)
    class Options(ActuatorDriver.Options):
        port: str = setting("str", None, required=True)         # e.g. /dev/ttyUSB0
        baudrate: int = setting("int", 57600, positive=True)

and its constructor takes such an ``Options`` (python-can's ``BusABC`` takes its configuration the same
way): ``DynamixelDriver(model, DynamixelDriver.Options(port="/dev/ttyUSB0"))``. An ``Options`` checks
itself when made (:class:`OptionsBase`), so a bad value is refused with one line naming the class, the
field and the value, whether it came from a file or from Python.

and may own whole sections of the config (``sections = {"contact": ContactOptions}``). :func:`check_table`
validates a table against such a schema: unknown keys and bad values raise :class:`ConfigError` naming
the file, section and key. Units are SI.
"""
from __future__ import annotations

import argparse
import dataclasses
import difflib
import math
import tomllib
from dataclasses import dataclass
from typing import Any


class ConfigError(ValueError):
    """A configuration problem; the message names the file, section and key."""


SHOWN_CHARS = 64    # of a name or value from a file, in a message
SHOWN_ITEMS = 20    # of a list of them


def show(value, limit: int = SHOWN_CHARS) -> str:
    """``value`` (a name or value read from a file or sent by a client) for a message: its ``repr`` (a string
    quoted, control characters escaped), past ``limit`` characters its first and last halves of ``limit`` and
    how long it was, so a 5 MB link name or a huge TOML array is not echoed whole and a long path still ends
    in its file's name."""
    head, tail = limit - limit // 2, limit // 2
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return f"{value[:head]!r}...{value[-tail:]!r} ({len(value)} characters)"
    text = repr(value)
    return f"{text[:head]}...{text[-tail:]} ({len(text)} characters)" if len(text) > limit else text


def show_all(items) -> str:
    """``[...]`` of ``items`` each :func:`show`-n, at most :data:`SHOWN_ITEMS` of them (saying how many more)."""
    items = list(items)
    shown = ", ".join(show(x) for x in items[:SHOWN_ITEMS])
    more = f", ... ({len(items) - SHOWN_ITEMS} more)" if len(items) > SHOWN_ITEMS else ""
    return f"[{shown}{more}]"


def did_you_mean(name, known, n: int = 3) -> str:
    """``" (did you mean 'a', 'b'?)"`` with the names of ``known`` nearest to a misspelt ``name``, or ``""``
    (also for a name too long to be a misspelling: difflib's time grows with the product of the lengths)."""
    if len(str(name)) > 4 * SHOWN_CHARS:
        return ""
    near = difflib.get_close_matches(str(name), [str(k) for k in known if len(str(k)) <= 4 * SHOWN_CHARS], n=n)
    return f" (did you mean {', '.join(show(x) for x in near)}?)" if near else ""


@dataclass(frozen=True)
class Key:
    kind: str                      # "float", "int", "bool", "str", "floats" (scalar or list), "ints", "matrix"
    default: Any = None
    low: float | None = None       # inclusive bounds for numbers (each element for lists)
    high: float | None = None
    choices: tuple | None = None
    positive: bool = False         # strictly > 0
    required: bool = False


def setting(kind: str, default=None, **bounds):
    """A dataclass field carrying its :class:`Key` (type, default, bounds)."""
    return dataclasses.field(default=default, metadata={"key": Key(kind, default, **bounds)})


def plain(value):
    """``value`` as TOML would give it: a NumPy array or tuple as a (nested) list, a NumPy scalar as a Python
    number, so :func:`check_value` takes what Python callers pass."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return value.tolist()
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


@dataclass(frozen=True)
class OptionsBase:
    """Base of the components' ``Options``: each :func:`setting` field is checked when the dataclass is made,
    as :func:`check_table` checks a table (ints stay ints, floats become float; a required field may not be
    None), so ``Options(**check_table(...))`` and ``Options(**table)`` agree; ConfigError naming the class,
    the field and the value."""

    def __post_init__(self):
        owner = type(self).__qualname__
        for f in dataclasses.fields(self):
            key = f.metadata.get("key")
            if key is None:
                continue
            value = getattr(self, f.name)
            if value is None:
                if key.required:
                    raise ConfigError(f"{owner}: {f.name} is required")
                continue
            object.__setattr__(self, f.name, check_value(plain(value), key, f"{owner} {f.name}"))

    def replace(self, **changes):
        """A copy with ``changes`` (checked)."""
        return dataclasses.replace(self, **changes)


def options_of(component, options):
    """``options``, an instance of ``component.Options``, or its defaults for None; TypeError for another."""
    cls = component.Options
    if options is None:
        return cls()
    if not isinstance(options, cls):
        raise TypeError(f"{type(component).__name__ if not isinstance(component, type) else component.__name__}: "
                        f"options must be a {cls.__qualname__}, got {type(options).__qualname__}")
    return options


def schema_keys(options: type) -> dict[str, Key]:
    """``{name: Key}`` of an ``Options`` dataclass, in declaration order."""
    return {f.name: f.metadata["key"] for f in dataclasses.fields(options) if "key" in f.metadata}


MAX_TOML_DEPTH = 32   # arrays and tables within each other in a TOML file rtctl reads (a run config needs 4)


def read_toml(path, what: str = "config", error: type[ValueError] = ConfigError) -> dict:
    """The parsed TOML file; ``error`` naming the file when it cannot be read or parsed, or when its arrays and
    tables nest more than :data:`MAX_TOML_DEPTH` deep (tomllib recurses once per level: a few hundred ``[``
    raised a RecursionError that named nothing, and deep values would recurse again in what reads them)."""
    deep = error(f"{path}: not a {what} rtctl reads: arrays and tables nested more than {MAX_TOML_DEPTH} deep")
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise deep from None
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value
        for child in children:
            if isinstance(child, (dict, list)):
                if depth >= MAX_TOML_DEPTH:
                    raise deep
                stack.append((child, depth + 1))
    return doc


def check_number(value, key: Key, where: str, integer: bool = False):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}: expected a number, got {show(value)}")
    if integer and not isinstance(value, int):
        raise ConfigError(f"{where}: expected an integer, got {show(value)}")
    if isinstance(value, int) and not -2 ** 63 <= value < 2 ** 63:
        raise ConfigError(f"{where}: integer out of the 64-bit range")
    if not math.isfinite(value):
        raise ConfigError(f"{where}: must be finite, got {show(value)}")
    if key.positive and not value > 0:
        raise ConfigError(f"{where}: must be > 0, got {show(value)}")
    if key.low is not None and value < key.low:
        raise ConfigError(f"{where}: must be >= {key.low}, got {show(value)}")
    if key.high is not None and value > key.high:
        raise ConfigError(f"{where}: must be <= {key.high}, got {show(value)}")
    return value


def check_value(value, key: Key, where: str):
    """``value`` checked against ``key`` (ints stay ints, floats become float); ConfigError naming ``where``."""
    if key.kind == "str":
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {show(value)}")
        if key.choices and value not in key.choices:
            raise ConfigError(f"{where}: must be one of {list(key.choices)}, got {show(value)}")
        return value
    if key.kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {show(value)}")
        return value
    if key.kind in ("float", "int"):
        return float(check_number(value, key, where)) if key.kind == "float" else \
            check_number(value, key, where, integer=True)
    if key.kind in ("floats", "ints"):
        items = value if isinstance(value, list) else [value]
        if not items:
            raise ConfigError(f"{where}: empty list")
        checked = [check_number(v, key, f"{where}[{i}]", integer=key.kind == "ints") for i, v in enumerate(items)]
        return checked if isinstance(value, list) else checked[0]
    if key.kind == "strs":
        items = value if isinstance(value, list) else [value]
        if not items or not all(isinstance(v, str) for v in items):
            raise ConfigError(f"{where}: expected a string or a non-empty list of strings, got {show(value)}")
        return list(items)
    if key.kind == "matrix":
        if not isinstance(value, list) or not value or not all(isinstance(r, list) for r in value):
            raise ConfigError(f"{where}: expected a list of rows (a matrix), got {show(value)}")
        if len({len(r) for r in value}) != 1:
            raise ConfigError(f"{where}: rows have different lengths")
        return [[check_number(v, key, f"{where}[{i}][{j}]") for j, v in enumerate(r)] for i, r in enumerate(value)]
    raise AssertionError(key.kind)


EXIT_USAGE = 2   # a command-line mistake (argparse's own status)


class Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line on stderr (``PROG: error: ...``), not the usage block first;
    the parser of every rtctl and rtctl-hil command, their subcommands' too."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (`{self.prog} -h` shows the usage)\n")

    def parse_known_args(self, args=None, namespace=None):
        """An argument no parser knows is named by the (sub)command given it (argparse hands a subcommand's
        leftovers up, and the top parser blamed ``rtctl`` for ``rtctl control status --bogus``)."""
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


def argument_type(key: Key | str, **bounds):
    """An argparse ``type`` that checks a command-line number as :func:`check_value` checks a config key
    (``key``, or ``Key(kind, **bounds)``): ``--duration -1`` is then one usage line naming the option."""
    key = key if isinstance(key, Key) else Key(key, **bounds)
    integer = key.kind == "int"

    def parse(text: str):
        value = int(text) if integer else float(text)   # ValueError: argparse's "invalid float value: 'x'"
        try:
            return check_value(value, key, "")
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix(": ")) from None

    parse.__name__ = "int" if integer else "float"
    return parse


def check_table(given, keys: dict[str, Key], where: str, owner: str = "") -> dict:
    """Every key of ``keys`` with its checked value or default. ``where`` is ``"FILE: [section]"``;
    ``owner`` (e.g. ``"driver 'sim'"``) is named when a key is unknown."""
    if not isinstance(given, dict):
        raise ConfigError(f"{where} must be a table, got {type(given).__name__}")
    for name in given:
        if name not in keys:
            of = f" for {owner}" if owner else ""
            raise ConfigError(f"{where} unknown key {show(name)}{of}{did_you_mean(name, keys, 1)}; "
                              f"allowed: {sorted(keys)}")
    out = {}
    for name, key in keys.items():
        if given.get(name) is not None:  # None: absent (TOML has no null; a validated table holds defaults)
            out[name] = check_value(given[name], key, f"{where} {name}")
        elif key.required:
            raise ConfigError(f"{where} {name} is required" + (f" for {owner}" if owner else ""))
        else:
            out[name] = key.default
    return out


@dataclass
class BuildContext:
    """What a component's ``from_config(options, context)`` may use, filled in as the run is assembled
    (robot models, then the plant, then drivers, controller and trajectory)."""

    source: str = "<config>"                       # the config file, named in errors
    base_dir: str | None = None                    # relative paths in the config are relative to it
    period: float = 1e-3                           # the loop period (s)
    model: Any = None                              # the controller's model
    plant_model: Any = None                        # the plant's own copy (model errors are applied to it)
    q_index: Any = None                            # actuated joints in q and v (rtctl.rt.interfaces.actuated_indices)
    v_index: Any = None
    joint_names: list = dataclasses.field(default_factory=list)
    sections: dict = dataclasses.field(default_factory=dict)   # validated sections owned by components
    plant: Any = None
    q0: Any = None                                 # the plant's initial configuration
    transmission: Any = None                       # the driver being built: its joints' transmission
    dynamics: Any = None                           # rtctl.dynamics.Dynamics of ``model``, shared
    model_file: Any = None                         # the file ``[robot] model`` names (a Path), None for a named model
    lock_joints: tuple = ()                        # ``[robot] lock_joints``: joints removed from that MJCF
    cartesian_controller: Any = None               # a Cartesian controller of this run: its trajectory follows it
    steps_plant: bool = True                       # the plant-sharing driver being built advances the plant
    sensors: dict = dataclasses.field(default_factory=dict)    # the robot's sensors by name (``[[sensors]]``)

    @property
    def n(self) -> int:
        return len(self.joint_names)

    def vector(self, value, name: str, n: int | None = None):
        """``value`` (a scalar or one value per actuated joint) as an array of ``n`` (default: every
        actuated joint); ValueError naming ``name``."""
        import numpy as np

        n = self.n if n is None else n
        arr = np.asarray(value, dtype=float)
        if arr.ndim == 0:
            return np.full(n, float(arr))
        if arr.shape != (n,):
            raise ValueError(f"{name}: expected {n} values (one per actuated joint), got {arr.size}")
        return arr
