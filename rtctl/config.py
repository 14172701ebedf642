"""Run configuration in TOML: validation and assembly of a :class:`~rtctl.rt.loop.ControlLoop`.

The application layer. The core sections (``[robot]``, ``[loop]``, ``[safety]``, ``[telemetry]``,
``[control]``, ``[[schedule]]``) are declared below; every component section is declared by the component
it selects, found by name in :mod:`rtctl.registry`: ``[plant] type``, ``[driver] backend`` (or several
``[[drivers]]``, each with its ``joints``), ``[[sensors]]`` and ``[estimator]`` (:mod:`rtctl.sensing`), ``[controller] type``, ``[trajectory] type``, each with its own
``Options`` schema, and the sections a selected component owns (``[contact]`` of the legged plant,
``[patient]`` of the jaw plant, ``[therapist]`` of the chewing CPG, ``[bite]`` of the jaw controllers) and
those the named robot model owns (its factory's ``sections``: ``{name: check(table, where) -> checked
table}``, e.g. the ``[mechanism]`` of robot model ``"geared"``; the factory is called with each checked
section as a keyword argument). Unknown keys and out-of-range values raise :class:`ConfigError` naming the
file, section and key. Units are SI. A minimal config::

    [robot]
    model = "arm7"            # bundled name, robot model name, URDF/MJCF path (relative to the config file)
                              # or package://PACKAGE/PATH, a file of an installed Python package

    [controller]
    type = "computed_torque"
    kp = 400.0

    [trajectory]
    type = "min_jerk"
    goal = [0.5, 0.4, 0.3, -0.6, 0.2, 0.3, 0.1]
    duration = 2.0
"""
from __future__ import annotations

import copy
import errno
import importlib.util
import os
from pathlib import Path

from . import bundled_model_path
from .options import (BuildContext, ConfigError, Key, check_number, check_table, did_you_mean,  # noqa: F401
                      read_toml, schema_keys, show)  # read_toml: part of this module's API
from .registry import CONTROLLERS, DRIVERS, PLANTS, ROBOTS, TRAJECTORIES
from .sensing import build_estimator, build_sensors, validate_estimator, validate_sensors

DEMO_CONFIG = Path(__file__).parent / "data" / "configs" / "demo.toml"

CORE_SCHEMA: dict[str, dict[str, Key]] = {
    "robot": {
        "model": Key("str", "arm7"),  # bundled name, robot model name, file path (relative to the config), package://
        "floating_base": Key("str", "fixed", choices=("fixed", "free_flyer", "euler", "planar")),
        "inertia": Key("str", "warn", choices=("warn", "strict", "repair")),   # a URDF's inconsistent inertias
        "lock_joints": Key("strs", []),   # an MJCF's joints removed, their bodies welded (a gripper's fingers)
    },
    "loop": {
        "rate_hz": Key("float", 1000.0, positive=True, high=100_000.0),  # control rate
        "duration": Key("float", 3.0, positive=True, high=86_400.0),  # s of control time
        # a cycle ending after the next deadline: count it; skip the missed deadlines and resynchronise; or trip
        "overrun_policy": Key("str", "count", choices=("count", "skip", "trip")),
        "max_consecutive_overruns": Key("int", 10, low=1),  # overrun_policy trip: trips after this many in a row
        "pace": Key("bool", True),  # false: cycles back to back (as --offline)
        "realtime_priority": Key("int", None, low=1, high=99),  # SCHED_FIFO priority of the loop thread
        "cpus": Key("ints", None, low=0),  # CPU affinity of the loop
        "lock_memory": Key("bool", False),  # mlockall: current and future pages
        "disable_gc": Key("bool", True),  # gc frozen and disabled while the loop runs
        "time_slice_us": Key("float", None, low=0.0, high=100_000.0),   # default 100 where possible; 0: the kernel's
    },
    "safety": {
        "safe_mode": Key("str", None, choices=("hold", "damping", "zero_torque")),  # default: hold if the model can
        "damping_gain": Key("floats", None, low=0.0),  # N m s/rad per joint of the damping state
        "hold_kp": Key("float", None, positive=True),      # 1/s^2: the hold's stiffness (default rtctl.safety.stop)
        "hold_kd": Key("float", None, positive=True),      # 1/s, default 2 sqrt(hold_kp)
        "position_margin": Key("float", 0.05, low=0.0),  # rad or m inside the hard limits: the soft limits
        "velocity_scale": Key("float", 1.0, positive=True),  # of each joint's velocity limit
        "watchdog_cycles": Key("int", 5, low=1),  # a state not fresh for more cycles trips
        "effort_clamp": Key("bool", True),  # clamp commands to the effort limits
        "expect_trip": Key("bool", False),  # the run must trip: exit 0 if it does, 3 if not
        "acceleration_limit": Key("floats", None, positive=True),  # rad/s^2 or m/s^2: moves are checked against it
    },
    "telemetry": {  # rtctl.telemetry: ZeroMQ PUB of per-cycle samples (schema in rtctl/telemetry/schema.py)
        "enabled": Key("bool", False),  # publish every cycle's sample
        "endpoint": Key("str", "tcp://127.0.0.1:5555"),  # ZeroMQ PUB, msgpack
        "plotjuggler": Key("bool", False),  # flat JSON for PlotJuggler
        "plotjuggler_endpoint": Key("str", "tcp://127.0.0.1:5556"),
        "plotjuggler_decimation": Key("int", 1, low=1, high=1000),  # every Nth sample
        "plotjuggler_format": Key("str", "array", choices=("array", "object")),  # per batch (3.16+) / per sample
        "capacity": Key("int", 4096, low=16, high=10_000_000),  # ring rows
        "batch_period": Key("float", 0.01, positive=True, high=1.0),  # s between published batches
        "meta_period": Key("float", 1.0, positive=True, high=60.0),  # s between rtctl/meta messages
        "sndhwm": Key("int", 1000, low=1),  # ZeroMQ send high-water mark (messages)
        "allow_remote": Key("bool", False),  # bind beyond loopback
        "foxglove": Key("bool", False),                        # live Foxglove WebSocket server
        "foxglove_host": Key("str", "127.0.0.1"),              # not loopback: needs allow_remote
        "foxglove_port": Key("int", 8765, low=0, high=65535),   # 0: a free port
        "foxglove_decimation": Key("int", 1, low=1, high=1000),  # every Nth sample
        "foxglove_backlog": Key("int", 1024, low=1, high=1_000_000),  # messages per client, oldest dropped
        "foxglove_allowed_origins": Key("strs", ["https://app.foxglove.dev"]),  # browser origins (not file://)
        "foxglove_max_clients": Key("int", 8, low=1, high=1000),
        "foxglove_scene_rate": Key("float", 30.0, low=0.1, high=1000.0),  # Hz of the 3D view's /tf and force arrows
        "switch_interval": Key("float", 0.0002, low=0.0, high=0.1),   # s, thread publisher only; 0: leave it
        "publisher": Key("str", "process", choices=("process", "thread")),  # where samples are encoded and sent
        "publisher_nice": Key("int", 10, low=0, high=19),   # niceness the publisher process adds to the loop's
    },
    "control": {  # rtctl.operator.control: REQ/REP run-time commands, validated, applied at cycle boundaries
        "enabled": Key("bool", False),  # status, e-stop, re-arm, gains and targets at run time
        "endpoint": Key("str", "tcp://127.0.0.1:5557"),  # ZeroMQ, msgpack or JSON requests
        "token_file": Key("str", ""),        # 0600 file holding the token; else $RTCTL_CONTROL_TOKEN, else the default file
        "curve_secret_key": Key("str", ""),  # ZeroMQ CURVE: the server's .key_secret certificate
        "curve_clients": Key("str", ""),     # ZeroMQ CURVE: directory of the allowed clients' .key certificates
        "kp_max": Key("float", 1e5, positive=True),  # largest kp set_gains accepts
        "kd_max": Key("float", 1e4, positive=True),  # largest kd set_gains accepts
        "frequency_max": Key("float", 20.0, positive=True),  # Hz, largest set_cpg frequency
        "duration_max": Key("float", 60.0, positive=True),  # s, longest set_target move
        "allow_remote": Key("bool", False),  # bind beyond loopback: needs ZeroMQ CURVE
    },
}

# section -> (registry, the key naming the component, its default)
COMPONENTS = {
    "plant": (PLANTS, "type", "rigid_body"),
    "driver": (DRIVERS, "backend", "sim"),
    "controller": (CONTROLLERS, "type", "computed_torque"),
    "trajectory": (TRAJECTORIES, "type", "min_jerk"),
}
TOP_LEVEL = (*CORE_SCHEMA, *COMPONENTS, "drivers", "sensors", "estimator", "schedule", "collision")


def collision_keys() -> dict[str, Key]:
    """``[collision]``: the external-torque observer's detection and reaction (schema beside its code)."""
    from .loops.collision import CollisionMonitor

    return schema_keys(CollisionMonitor.Options)


def component(section: str, table: dict, where: str):
    """The class a component table selects (``type`` / ``backend``); ConfigError naming the key."""
    registry, selector, default = COMPONENTS[section]
    name = table.get(selector, default) if isinstance(table, dict) else default
    try:
        return registry.get(name)
    except ValueError as exc:
        raise ConfigError(f"{where} {selector}: {exc}") from None


def component_keys(section: str, cls) -> dict[str, Key]:
    """The keys of a component table: its selector, then the class's own ``Options``."""
    _, selector, default = COMPONENTS[section]
    return {selector: Key("str", default), **schema_keys(cls.Options)}


def component_options(section: str, cls, table: dict, where: str) -> dict:
    """A component table checked against its class's schema, without the selector: ``from_config``'s options."""
    options = check_table(table, component_keys(section, cls), where, owner=f"{section} '{cls.registered_name}'")
    del options[COMPONENTS[section][1]]
    return options


def section_keys(raw: dict, section: str) -> dict[str, Key]:
    """The keys ``[section]`` takes in the config ``raw`` (parsed or validated): a core section's, the
    selected component's, or those of a section a selected component owns; ConfigError if none."""
    if section in CORE_SCHEMA:
        return CORE_SCHEMA[section]
    if section in COMPONENTS:
        table = _driver_tables(raw, "<config>")[0][1] if section == "driver" else raw.get(section, {})
        return component_keys(section, component(section, table, f"[{section}]"))
    for owner_section, cls in _selected(raw, "<config>"):
        if section in cls.sections:
            return schema_keys(cls.sections[section])
    raise ConfigError(f"[{section}] is not a section of this config")


def _driver_tables(raw: dict, source: str) -> list[tuple[str, dict]]:
    """``(where, table)`` of each driver: one ``[driver]`` or several ``[[drivers]]``."""
    if "driver" in raw and "drivers" in raw:
        raise ConfigError(f"{source}: give either one [driver] or several [[drivers]], not both")
    if "drivers" not in raw:
        return [(f"{source}: [driver]", raw.get("driver", {}))]
    tables = raw["drivers"]
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise ConfigError(f"{source}: [[drivers]] must be a non-empty array of tables (one per driver)")
    return [(f"{source}: [[drivers]] {k}", t) for k, t in enumerate(tables)]


def _selected(raw: dict, source: str):
    """``(section, class)`` of every component the config selects."""
    out = []
    for section in COMPONENTS:
        tables = _driver_tables(raw, source) if section == "driver" else [(f"{source}: [{section}]",
                                                                            raw.get(section, {}))]
        out += [(section, component(section, table, where)) for where, table in tables]
    return out


def _robot_sections(raw: dict) -> tuple[str, dict]:
    """``(name, {section: check})`` of the named robot model ``[robot] model`` selects (``{}``: none owned)."""
    robot = raw.get("robot", {})
    name = robot.get("model", CORE_SCHEMA["robot"]["model"].default) if isinstance(robot, dict) else None
    if not isinstance(name, str) or name not in ROBOTS.names():
        return name, {}
    try:
        return name, getattr(ROBOTS.get(name), "sections", {})
    except ValueError:
        return name, {}


def _owner_of(section: str) -> str:
    """Which known component owns ``[section]`` (for the error message), or ``""``."""
    for kind, (registry, _, _) in COMPONENTS.items():
        for name, cls in registry.all().items():
            if section in cls.sections:
                return f"{kind} '{name}'"
    return ""


def _validate_schedule(entries, source: str) -> list[dict]:
    """``[[schedule]]``: control-channel commands at control times ``t`` (s); fields are checked at build."""
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(f"{source}: [[schedule]] must be an array of tables (each with t and cmd)")
    out = []
    for k, entry in enumerate(entries):
        where = f"{source}: [[schedule]] {k}"
        if "t" not in entry or "cmd" not in entry:
            raise ConfigError(f"{where}: needs 't' (control time, s) and 'cmd' (a control-channel command)")
        check_number(entry["t"], Key("float", low=0.0), f"{where} t")
        out.append(dict(entry, t=float(entry["t"])))
    return out


def validate(raw: dict, source: str = "<config>") -> dict:
    """Check a parsed TOML document against the core schema and the selected components' own schemas;
    return it with defaults filled in."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: top level must be a table")
    selected = _selected(raw, source)
    owned = {name: (cls, options) for _, cls in selected for name, options in cls.sections.items()}
    robot_name, robot_sections = _robot_sections(raw)
    for section in raw:
        if section not in TOP_LEVEL and section not in owned and section not in robot_sections:
            owner = _owner_of(section)
            if owner:
                chosen = ", ".join(f"{s} '{c.registered_name}'" for s, c in selected if s != "driver")
                raise ConfigError(f"{source}: [{section}] applies to {owner} only (this config: {chosen})")
            raise ConfigError(f"{source}: unknown section [{section}]; sections: {sorted(TOP_LEVEL)} and "
                              f"those of the selected components")
    out: dict = {}
    for section, keys in CORE_SCHEMA.items():
        given = raw.get(section, {})
        if section == "control" and isinstance(given, dict) and "token" in given:
            raise ConfigError(f"{source}: [control] token: a token is not kept in a run config (configs get copied "
                              "and shared); put it in a file only you can read (chmod 600) and set token_file, or "
                              "set RTCTL_CONTROL_TOKEN, or leave both out: the server then creates a private token "
                              "file for you")
        out[section] = check_table(given, keys, f"{source}: [{section}]")
    for section in ("plant", "controller", "trajectory"):
        where = f"{source}: [{section}]"
        cls = component(section, raw.get(section, {}), where)
        out[section] = check_table(raw.get(section, {}), component_keys(section, cls), where,
                                   owner=f"{section} '{cls.registered_name}'")
    drivers = []
    for where, table in _driver_tables(raw, source):
        cls = component("driver", table, where)
        drivers.append(check_table(table, component_keys("driver", cls), where, owner=f"driver '{cls.registered_name}'"))
    if "drivers" in raw:
        out["drivers"] = drivers
    else:
        out["driver"] = drivers[0]
    for name, (cls, options) in owned.items():
        out[name] = check_table(raw.get(name, {}), schema_keys(options), f"{source}: [{name}]",
                                owner=f"'{cls.registered_name}'")
    for name, check in robot_sections.items():
        if name not in raw:
            raise ConfigError(f"{source}: robot model '{robot_name}' needs a [{name}] section")
        out[name] = check(raw[name], f"{source}: [{name}]")
    out["sensors"] = validate_sensors(raw, source)
    estimator = validate_estimator(raw, source)
    if estimator is not None:
        out["estimator"] = estimator
    out["schedule"] = _validate_schedule(raw.get("schedule", []), source)
    out["collision"] = check_table(raw.get("collision", {}), collision_keys(), f"{source}: [collision]")
    out["_source"] = source       # named by the errors of the build
    return out


def load_config(path: str | Path) -> dict:
    path = Path(path)
    raw = read_toml(path)
    if "sweep" in raw:
        raise ConfigError(f"{path}: is a sweep file, not a run config: run it with "
                          f"`rtctl sweep {path} --out results.parquet`")
    cfg = validate(raw, str(path))
    cfg["_dir"] = str(path.resolve().parent)
    cfg["_source"] = str(path)
    return cfg


def bundled_config_path(name: str) -> Path:
    """A run config shipped with rtctl by name (``"demo"``, or a robot folder's ``"stewart"``,
    ``"jaw"``, ``"legged_biped"``, ...): ``rtctl/data/configs/NAME.toml`` or ``rtctl/plants/*/NAME.toml``."""
    robots = Path(importlib.util.find_spec("rtctl.plants").submodule_search_locations[0])
    candidates = [DEMO_CONFIG.parent / f"{name}.toml", *sorted(robots.glob(f"*/{name}.toml"))]
    for path in candidates:
        if path.is_file():
            return path
    known = bundled_configs()
    raise FileNotFoundError(f"no bundled config {name!r}{did_you_mean(name, known)}; bundled run configs: {known}")


def bundled_configs() -> list[str]:
    """The names of the run configs shipped with rtctl (:func:`bundled_config_path` finds each)."""
    robots = Path(importlib.util.find_spec("rtctl.plants").submodule_search_locations[0])
    return sorted({p.stem for p in [*DEMO_CONFIG.parent.glob("*.toml"), *robots.glob("*/*.toml")]
                   if "sweep" not in read_toml(p)})


def _resolve_model_path(spec: str, base_dir: str | None) -> Path:
    """A ``package://`` URL's file (:mod:`rtctl.model.package_file`), a path (relative to ``base_dir``, the config
    file's folder) or a bundled URDF's name."""
    from .model.package_file import is_package_url, package_file   # here: rtctl.model imports NumPy

    if is_package_url(spec):
        return package_file(spec)
    candidate = Path(spec)
    if not candidate.is_absolute() and base_dir is not None:
        candidate = Path(base_dir) / candidate
    if candidate.suffix in (".urdf", ".xml") or candidate.exists():
        return candidate
    return bundled_model_path(spec)


def _robot_models(cfg: dict, context: BuildContext):
    """The controller's model and the plant's own copy: a named robot model (:data:`ROBOTS`, given the config
    sections it owns), a bundled URDF, a URDF path or an MJCF path (``.xml``: compiled by MuJoCo, the mujoco
    extra; the file declares its own base)."""
    from .model import ModelError
    from .model.urdf import load_urdf

    robot = cfg["robot"]
    try:
        if robot["model"] in ROBOTS.names():
            if robot["lock_joints"]:
                raise ConfigError(f"{context.source}: [robot] lock_joints: applies to an MJCF model (.xml), "
                                  f"not to the robot model {robot['model']!r}")
            factory = ROBOTS.get(robot["model"])
            sections = {name: cfg[name] for name in getattr(factory, "sections", {})}
            return factory(**sections), factory(**sections)
        path = _resolve_model_path(robot["model"], context.base_dir)
        context.model_file = path
        if robot["lock_joints"] and path.suffix != ".xml":
            raise ConfigError(f"{context.source}: [robot] lock_joints: applies to an MJCF model (.xml), "
                              f"not to {path.name}")
        context.lock_joints = tuple(robot["lock_joints"])
        if path.suffix == ".xml":
            from .plants.mujoco.model import load_mujoco_model
            model = load_mujoco_model(path, lock_joints=context.lock_joints)[0]
            return model, copy.deepcopy(model)
        base = None if robot["floating_base"] == "fixed" else robot["floating_base"]
        model = load_urdf(path, base, inertia=robot["inertia"])          # one load: one inertia warning
        return model, copy.deepcopy(model)
    except (ModelError, FileNotFoundError, ValueError, ImportError) as exc:
        raise ConfigError(f"{context.source}: [robot] model: {exc}") from None


def robot_of(cfg: dict):
    """A validated config's robot as its runs describe it (:mod:`rtctl.telemetry.description`): the controller's
    model and its sensors' mounts (:class:`rtctl.telemetry.scene.SensorMount`), without building the plant,
    drivers or sensors."""
    from .model import ModelError
    from .telemetry.description import sensor_mount

    context = BuildContext(source=cfg.get("_source", "<config>"), base_dir=cfg.get("_dir"))
    model = _robot_models(cfg, context)[0]
    mounts = []
    for k, table in enumerate(cfg.get("sensors", [])):
        try:
            mounts.append(sensor_mount(model, table["name"], table["kind"], table["frame"], table["mount_xyz"],
                                       table["mount_rpy"]))
        except ModelError as exc:
            raise ConfigError(f"{context.source}: [[sensors]] {k} ({show(table['name'])}): {exc}") from None
    return model, tuple(mounts)


class _Section:
    """Errors raised while building ``[section]`` become ConfigErrors naming the file and section."""

    def __init__(self, context: BuildContext, where: str):
        self.source = context.source
        self.prefix = f"{context.source}: {where}"

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is not None and isinstance(exc, ValueError) and not isinstance(exc, ConfigError):
            if str(exc).startswith("["):     # it names its own section (one the component owns): the file only
                raise ConfigError(f"{self.source}: {exc}") from None
            raise ConfigError(f"{self.prefix} {exc}") from None
        return False


def _check_command_fields(controller: str, controller_cls, driver_plans) -> None:
    """A drive in position or velocity mode closes the joint loop on the set points only a controller that writes
    them gives (``Controller.writes``); one in effort mode would apply the feed-forward effort alone. ConfigError
    naming the driver otherwise."""
    sets_points = "position" in controller_cls.writes
    for where, _, options, _, _ in driver_plans:
        mode = options["mode"]
        if mode != "effort" and not sets_points:
            raise ConfigError(f"{where} mode = {mode!r}: controller {controller!r} writes only effort, so the "
                              f"drives would get no {mode} set point (a Dynamixel would hold still); use "
                              "[controller] type = 'joint_position', or mode = 'effort'")
        if mode == "effort" and sets_points:
            raise ConfigError(f"{where} mode = 'effort': controller {controller!r} gives the drives' own "
                              "position loop its set points, which a drive in effort mode would drop (it would apply "
                              "the feed-forward effort alone); set mode = 'position' or 'velocity'")


def _build_drivers(cfg: dict, context: BuildContext) -> list:
    """Every driver over its joints, their transmissions' rotor inertia added to both models' armature."""
    import numpy as np

    from .rt.interfaces import actuated_indices

    _, v_all, names = actuated_indices(context.model)
    tables = _driver_tables(cfg, context.source)
    plans = []
    for where, table in tables:
        cls = component("driver", table, where)
        options = component_options("driver", cls, table, where)
        joints = options["joints"] or names
        with _Section(context, where.removeprefix(f"{context.source}: ")):
            unknown = [j for j in joints if j not in names]
            if unknown:
                raise ValueError(f"joints: unknown or unactuated joints {unknown}; actuated joints: {names}")
            transmission = cls.transmission_from_config(options, len(joints))
        plans.append((where, cls, options, joints, transmission))
    if any(options["rotor_inertia"] is not None for _, _, options, _, _ in plans):
        armature = np.zeros(context.model.nv)
        for _, _, _, joints, transmission in plans:
            armature[v_all[[names.index(j) for j in joints]]] = transmission.armature()
        context.model.set_armature(armature)
        context.plant_model.set_armature(armature)
    return plans


def build(cfg: dict):
    """Assemble model, plant, drivers, controller, trajectory, safety and loop; return the loop."""
    from .dynamics import Dynamics
    from .rt.hardware import HardwareError
    from .rt.interfaces import actuated_indices
    from .rt.loop import ControlLoop
    from .rt.realtime import TIME_SLICE, RealtimeSettings
    from .safety import SafetyMonitor

    src = cfg.get("_source", "<config>")
    loop_cfg, saf = cfg["loop"], cfg["safety"]
    context = BuildContext(source=src, base_dir=cfg.get("_dir"), period=1.0 / loop_cfg["rate_hz"])
    context.model, context.plant_model = _robot_models(cfg, context)
    context.q_index, context.v_index, context.joint_names = actuated_indices(context.model)
    driver_plans = _build_drivers(cfg, context)
    chosen = {section: component(section, cfg[section], f"{src}: [{section}]")
              for section in ("plant", "controller", "trajectory")}
    _check_command_fields(cfg["controller"]["type"], chosen["controller"], driver_plans)
    owned = {name for cls in chosen.values() for name in cls.sections} | \
        {name for _, cls, _, _, _ in driver_plans for name in cls.sections}
    context.sections = {name: cfg[name] for name in owned}

    def options_of(section):
        return chosen[section], component_options(section, chosen[section], cfg[section], f"{src}: [{section}]")

    cls, options = options_of("plant")
    with _Section(context, "[plant]"):
        context.plant = cls.from_config(options, context)
    context.q0 = context.plant.q.copy()
    drivers = []
    last_sim = max((k for k, plan in enumerate(driver_plans) if plan[1].shares_plant),
                   default=-1)
    for k, (where, cls, options, joints, transmission) in enumerate(driver_plans):
        context.transmission, context.steps_plant = transmission, k == last_sim
        with _Section(context, where.removeprefix(f"{src}: ")):
            drivers.append(cls.from_config(dict(options, joints=joints if len(driver_plans) > 1 else
                                                options["joints"]), context))
    sensors = build_sensors(cfg, context)
    estimator = build_estimator(cfg, context)
    context.dynamics = Dynamics(context.model)
    cls, options = options_of("controller")
    with _Section(context, "[controller]"):
        controller = cls.from_config(options, context)
    cls, options = options_of("trajectory")
    with _Section(context, "[trajectory]"):
        trajectory = cls.from_config(options, context)
    if trajectory.n != context.n:
        raise ConfigError(f"{src}: [trajectory] has {trajectory.n} joints, the robot has {context.n} actuated joints")
    with _Section(context, "[trajectory]"):
        initial_state = trajectory.initial_state()
    if initial_state is not None:  # a gait starts the plant on its planned state, base included
        if cfg["plant"].get("initial_position") is not None:
            raise ConfigError(f"{src}: [plant] initial_position: trajectory '{cfg['trajectory']['type']}' sets "
                              "the initial state")
        with _Section(context, "[trajectory]"):
            context.plant.reset(*initial_state)
    with _Section(context, "[safety]"):
        safety = SafetyMonitor(
            context.model, position_margin=saf["position_margin"], velocity_scale=saf["velocity_scale"],
            safe_mode=saf["safe_mode"],
            damping_gain=None if saf["damping_gain"] is None else context.vector(saf["damping_gain"], "damping_gain"),
            watchdog_cycles=saf["watchdog_cycles"], effort_clamp=saf["effort_clamp"],
            acceleration_limit=None if saf["acceleration_limit"] is None else context.vector(
                saf["acceleration_limit"], "acceleration_limit"), hold_kd=saf["hold_kd"],
            **({} if saf["hold_kp"] is None else {"hold_kp": saf["hold_kp"]}))
    if cfg["plant"].get("initial_position") is not None:
        problem = safety.position_violation(context.q0[context.q_index], "[plant] initial_position")
        if problem:
            raise ConfigError(f"{src}: {problem}")
    problem = trajectory.limit_violation(safety)
    if problem:
        raise ConfigError(f"{src}: {problem}")
    slice_us = loop_cfg["time_slice_us"]
    if slice_us is not None and 0.0 < slice_us < TIME_SLICE * 1e6:
        raise ConfigError(f"{src}: [loop] time_slice_us = {slice_us:g}: the kernel's shortest slice is "
                          f"{TIME_SLICE * 1e6:.0f} us (0 keeps its default)")
    realtime = RealtimeSettings(priority=loop_cfg["realtime_priority"], cpus=loop_cfg["cpus"],
                                lock_memory=loop_cfg["lock_memory"], disable_gc=loop_cfg["disable_gc"],
                                time_slice=TIME_SLICE if slice_us is None else (slice_us * 1e-6 or None),
                                time_slice_asked=slice_us is not None)
    try:
        control_loop = ControlLoop(model=context.model, drivers=drivers, controller=controller, trajectory=trajectory,
                                   safety=safety, rate_hz=loop_cfg["rate_hz"], overrun_policy=loop_cfg["overrun_policy"],
                                   max_consecutive_overruns=loop_cfg["max_consecutive_overruns"],
                                   pace=loop_cfg["pace"], realtime=realtime, sensors=sensors, estimator=estimator)
    except HardwareError as exc:
        raise ConfigError(f"{src}: [[drivers]] {exc}") from None
    except ValueError as exc:  # the safety monitor's configure: the hold's gains at this rate
        raise ConfigError(f"{src}: [safety] {exc}") from None
    problem = controller.gain_violation(controller.kp, controller.kd, control_loop.sampling, context.q0)
    if problem:
        raise ConfigError(f"{src}: [controller] {problem}")
    if cfg["collision"]["enabled"]:
        from .loops.collision import CollisionMonitor

        with _Section(context, "[collision]"):
            CollisionMonitor.from_config(cfg["collision"], control_loop, context.dynamics)
    for section, part in (("plant", context.plant), ("controller", controller), ("trajectory", trajectory)):
        if part is not None:
            with _Section(context, f"[{section}] '{cfg[section][COMPONENTS[section][1]]}':"):
                part.add_loop_hooks(control_loop)
    _wire_operator_surfaces(control_loop, cfg, context)
    return control_loop


def _wire_operator_surfaces(control_loop, cfg: dict, context: BuildContext) -> None:
    """Telemetry, the control channel and the ``[[schedule]]`` of commands."""
    src = context.source
    if cfg["telemetry"]["enabled"] or cfg["control"]["enabled"]:
        from .operator.wiring import wire
        try:
            wire(control_loop, cfg["telemetry"], cfg["control"])   # its errors name the surface that failed
        except ValueError as exc:
            in_use = os.strerror(errno.EADDRINUSE) in str(exc)
            raise ConfigError(f"{src}: {exc}" + ("; another program (another rtctl?) is serving there: stop it "
                                                 "or set another endpoint or port" if in_use else "")) from None
    if cfg.get("schedule"):
        from .operator.control import CommandSchedule, ControlServer, Refused
        control = control_loop.control
        server = None if control is None else control.server   # the operator process's in-process validator
        if server is None:
            limits = {k: cfg["control"][k] for k in ("kp_max", "kd_max", "frequency_max", "duration_max")}
            server = ControlServer(control_loop, **limits)  # validation and apply only: no socket
        control_loop.schedule = CommandSchedule(server, cfg["schedule"])
        try:
            control_loop.schedule.check()
        except Refused as exc:
            raise ConfigError(f"{src}: {exc}") from None


def session_loop(config, duration: float | None = None):
    """``(loop, cfg)`` of a config (path or validated dict) built to run offline (``pace`` off) for
    ``duration`` seconds (default: its own), as the jaw session records it."""
    cfg = load_config(config) if not isinstance(config, dict) else config
    if duration is not None:
        cfg["loop"]["duration"] = duration
    cfg["loop"]["pace"] = False
    return build(cfg), cfg
