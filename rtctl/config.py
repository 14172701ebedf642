"""Run configuration in TOML: schema, validation and assembly of a :class:`~rtctl.rt.loop.ControlLoop`.

Every section and key is declared below with its type, range and default;
unknown keys and out-of-range values raise :class:`ConfigError` naming the
file, section and key. Units are SI. A minimal config::

    [robot]
    model = "arm7"            # bundled name or URDF path (relative to the config file)

    [controller]
    type = "computed_torque"
    kp = 400.0

    [trajectory]
    type = "min_jerk"
    goal = [0.5, 0.4, 0.3, -0.6, 0.2, 0.3, 0.1]
    duration = 2.0
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import bundled_model_path


DEMO_CONFIG = Path(__file__).parent / "data" / "configs" / "demo.toml"


class ConfigError(ValueError):
    """A configuration problem; the message names the file, section and key."""


@dataclass(frozen=True)
class Key:
    kind: str                      # "float", "int", "bool", "str", "floats" (scalar or list), "matrix", "ints"
    default: Any = None
    low: float | None = None       # inclusive bounds for numbers (each element for lists)
    high: float | None = None
    choices: tuple | None = None
    positive: bool = False         # strictly > 0
    required: bool = False


SCHEMA: dict[str, dict[str, Key]] = {
    "robot": {
        "model": Key("str", "arm7"),
        "floating_base": Key("str", "fixed", choices=("fixed", "free_flyer", "euler")),
    },
    "plant": {
        "type": Key("str", "rigid_body", choices=("rigid_body", "stewart", "geared", "quadruped_tail", "jaw",
                                                  "legged")),
        # integrator and substeps default to the plant's own (rk4 and 1; legged: semi_implicit_euler and 8)
        "integrator": Key("str", None, choices=("rk4", "semi_implicit_euler")),
        "substeps": Key("int", None, low=1, high=1000),
        "forward_dynamics": Key("str", "aba", choices=("aba", "cholesky")),  # legged plant: O(n) or O(n^3)
        "viscous_friction": Key("floats", 0.0, low=0.0),
        "coulomb_friction": Key("floats", 0.0, low=0.0),
        "coulomb_velocity_scale": Key("float", 1e-3, positive=True),
        "mass_scale": Key("float", 1.0, positive=True, high=100.0),
        # a point mass the controller's model does not know: kg, link or frame (default: the last link; the
        # mechanism plants: their platform / torso centre only), offset in that frame (m)
        "payload_mass": Key("float", 0.0, low=0.0),
        "payload_frame": Key("str", None),
        "payload_offset": Key("floats", None),
        "initial_position": Key("floats", None),
        "end_stops": Key("bool", None),  # rigid_body: spring-damper end stops at the hard limits (default true)
    },
    "driver": {
        "backend": Key("str", "sim", choices=("sim", "dynamixel", "can_mit", "cia402")),
        # CAN backends (can_mit, cia402): python-can interface and channel, one motor ID / node ID per joint
        "can_interface": Key("str", "socketcan"),
        "can_channel": Key("str", None),
        "can_ids": Key("ints", None, low=1, high=0x7FF),
        "motor_model": Key("str", "AK80-9"),
        # dynamixel backend: serial port, baud, one servo id per actuated joint, model name(s) of the table
        "port": Key("str", None),
        "baudrate": Key("int", 57600, positive=True),
        "servo_ids": Key("ints", None, low=0, high=252),
        "servo_model": Key("str", "XM430-W350"),
        "retries": Key("int", 1, low=0, high=10),
        # dynamixel and CAN backends: reply wait per cycle (per attempt), consecutive failed cycles -> fault
        "read_timeout": Key("float", 1e-3, positive=True, high=1.0),
        "max_failed_cycles": Key("int", 5, low=1),
        "mode": Key("str", "effort", choices=("effort", "position")),
        "position_noise": Key("float", 0.0, low=0.0),
        "velocity_noise": Key("float", 0.0, low=0.0),
        "effort_noise": Key("float", 0.0, low=0.0),
        "encoder_counts": Key("int", 0, low=0),
        "latency_cycles": Key("int", 0, low=0, high=1),
        "seed": Key("int", 0, low=0),
        "gear_ratio": Key("floats", None),
        "coupling": Key("matrix", None),
        "rotor_inertia": Key("floats", None, low=0.0),
        "torque_limit": Key("floats", None, positive=True),
    },
    "controller": {
        "type": Key("str", "computed_torque",
                    choices=("computed_torque", "floating_base_computed_torque", "ff_pd", "pd_gravity", "pd",
                             "stewart_computed_torque", "geared_computed_torque",
                             "quadruped_tail_ffpd", "quadruped_tail_open_loop", "jaw_computed_torque", "jaw_ff_pd",
                             "legged_ff_pd", "legged_computed_torque")),
        # computed torque: kp in 1/s^2 (default 400); torque-level laws (ff_pd, pd_gravity, pd): N m/rad,
        # robot-specific, so required.
        "kp": Key("floats", None, low=0.0),
        "kd": Key("floats", None, low=0.0),
    },
    "trajectory": {
        "type": Key("str", "min_jerk", choices=("min_jerk", "spline", "sinusoid", "stewart_pose",
                                                    "quadruped_tail_pitch", "quadruped_tail_hold", "jaw_cpg",
                                                    "biped_walk", "quadruped_trot")),
        "start": Key("floats", None),
        "goal": Key("floats", None),
        "duration": Key("float", None, positive=True),
        "t0": Key("float", 0.0, low=0.0),
        "times": Key("floats", None),
        "waypoints": Key("matrix", None),
        "boundary": Key("str", "clamped", choices=("clamped", "natural")),
        "center": Key("floats", None),
        "amplitude": Key("floats", None),
        "frequency": Key("floats", None, positive=True),
        "phase": Key("floats", 0.0),
        "pattern": Key("str", None),   # jaw_cpg: normal, hard_food, lateral_grinding
        # biped_walk / quadruped_trot (seed 004 Appendix B): step period T (s), stride l_s (m), swing height
        # h_f (m), trunk COM height z_c (m), double-support share of a step, leg-mass compensation, foot width (m)
        "period": Key("float", None, positive=True),
        "stride": Key("float", None, low=0.0),
        "foot_height": Key("float", None, low=0.0),
        "com_height": Key("float", None, positive=True),
        "double_support": Key("float", None, low=0.0, high=0.49),
        "leg_compensation": Key("bool", None),
        "foot_width": Key("float", None, low=0.0),
    },
    "patient": {  # jaw plant: the patient's impedance about the rest pose (rtctl.plants.jaw.model.PatientImpedance)
        "stiffness": Key("floats", None, low=0.0),      # 6: N/m (x, y, z), N m/rad (psi, theta, phi)
        "damping": Key("floats", None, low=0.0),        # 6: N s/m, N m s/rad
        "bolus_force": Key("float", None, low=0.0),     # N, resisting closing inside bolus_band
        "bolus_damping": Key("float", None, low=0.0),   # N s/m
        "bolus_band": Key("floats", None),              # (lower, upper) incisal vertical displacement, m
        "bolus_edge": Key("float", None, low=0.0),      # m
        "bolus_velocity_scale": Key("float", None, positive=True),   # m/s
    },
    "therapist": {  # jaw_cpg: limits checked before a CPG request is accepted (loops.cpg.TherapistLimits)
        "max_opening": Key("float", 0.045, positive=True, high=0.06),   # m of vertical incisal opening
        "max_speed": Key("float", 0.15, positive=True),                  # m/s of the incisal point
        "min_frequency": Key("float", 0.5, positive=True),               # Hz
        "max_frequency": Key("float", 2.0, positive=True),               # Hz
        "max_force": Key("float", None, positive=True),                  # N per leg: lowers the effort clamp
    },
    "loop": {
        "rate_hz": Key("float", 1000.0, positive=True, high=100_000.0),
        "duration": Key("float", 3.0, positive=True, high=86_400.0),
        "overrun_policy": Key("str", "count", choices=("count", "skip", "trip")),
        "max_consecutive_overruns": Key("int", 10, low=1),
        "pace": Key("bool", True),
        "realtime_priority": Key("int", None, low=1, high=99),
        "cpus": Key("ints", None, low=0),
        "lock_memory": Key("bool", False),
        "disable_gc": Key("bool", True),
    },
    "safety": {
        "safe_mode": Key("str", "damping", choices=("damping", "zero_torque")),
        "damping_gain": Key("floats", None, low=0.0),
        "position_margin": Key("float", 0.05, low=0.0),
        "velocity_scale": Key("float", 1.0, positive=True),
        "watchdog_cycles": Key("int", 5, low=1),
        "effort_clamp": Key("bool", True),
        "expect_trip": Key("bool", False),
        "acceleration_limit": Key("floats", None, positive=True),  # rad/s^2 or m/s^2: moves are checked against it
    },
    "telemetry": {  # rtctl.telemetry: ZeroMQ PUB of per-cycle samples (schema in rtctl/telemetry/schema.py)
        "enabled": Key("bool", False),
        "endpoint": Key("str", "tcp://127.0.0.1:5555"),
        "plotjuggler": Key("bool", False),
        "plotjuggler_endpoint": Key("str", "tcp://127.0.0.1:5556"),
        "plotjuggler_decimation": Key("int", 1, low=1, high=1000),
        "capacity": Key("int", 4096, low=16, high=10_000_000),
        "batch_period": Key("float", 0.01, positive=True, high=1.0),
        "meta_period": Key("float", 1.0, positive=True, high=60.0),
        "sndhwm": Key("int", 1000, low=1),
        "allow_remote": Key("bool", False),
    },
    "contact": {  # legged plant: compliant ground of rtctl.dynamics.contact (ContactModel), SI units
        "stiffness": Key("float", 1e5, positive=True),
        "damping": Key("float", 500.0, low=0.0),
        "hunt_crossley": Key("float", 0.0, low=0.0),
        "friction": Key("float", 0.8, low=0.0),
        "static_friction": Key("float", None, low=0.0),
        "viscous_friction": Key("float", 0.0, low=0.0),
        "slip_velocity": Key("float", 0.05, positive=True),
        "ground_height": Key("float", 0.0),
    },
    "control": {  # rtctl.telemetry.control: REQ/REP run-time commands, validated, applied at cycle boundaries
        "enabled": Key("bool", False),
        "endpoint": Key("str", "tcp://127.0.0.1:5557"),
        "token_file": Key("str", ""),        # 0600 file holding the token; else $RTCTL_CONTROL_TOKEN, else the default file
        "curve_secret_key": Key("str", ""),  # ZeroMQ CURVE: the server's .key_secret certificate
        "curve_clients": Key("str", ""),     # ZeroMQ CURVE: directory of the allowed clients' .key certificates
        "kp_max": Key("float", 1e5, positive=True),
        "kd_max": Key("float", 1e4, positive=True),
        "frequency_max": Key("float", 20.0, positive=True),
        "duration_max": Key("float", 60.0, positive=True),
        "allow_remote": Key("bool", False),
    },
}

TRAJECTORY_KEYS = {
    "min_jerk": {"start", "goal", "duration", "t0"},
    "spline": {"times", "waypoints", "boundary"},
    "sinusoid": {"center", "amplitude", "frequency", "phase"},
    "stewart_pose": {"times", "waypoints", "t0"},   # pose rows [x, y, z, psi, theta, phi] (m, rad)
    "quadruped_tail_pitch": {"t0", "duration"},   # seed 000 Fig. 7/8 pitch motion
    "quadruped_tail_hold": {"duration"},
    "jaw_cpg": {"pattern", "frequency", "amplitude", "t0"},   # amplitude: per-axis scale of the pattern
    "biped_walk": {"period", "stride", "foot_height", "com_height", "double_support", "leg_compensation", "duration"},
    "quadruped_trot": {"period", "stride", "foot_height", "com_height", "double_support", "leg_compensation",
                       "foot_width", "duration"},
}


def _check_number(value, key: Key, where: str, integer: bool = False):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}: expected a number, got {value!r}")
    if integer and not isinstance(value, int):
        raise ConfigError(f"{where}: expected an integer, got {value!r}")
    if isinstance(value, int) and not -2 ** 63 <= value < 2 ** 63:
        raise ConfigError(f"{where}: integer out of the 64-bit range")
    if not math.isfinite(value):
        raise ConfigError(f"{where}: must be finite, got {value!r}")
    if key.positive and not value > 0:
        raise ConfigError(f"{where}: must be > 0, got {value!r}")
    if key.low is not None and value < key.low:
        raise ConfigError(f"{where}: must be >= {key.low}, got {value!r}")
    if key.high is not None and value > key.high:
        raise ConfigError(f"{where}: must be <= {key.high}, got {value!r}")
    return value


def _validate_value(value, key: Key, where: str):
    if key.kind == "str":
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        if key.choices and value not in key.choices:
            raise ConfigError(f"{where}: must be one of {list(key.choices)}, got {value!r}")
        return value
    if key.kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if key.kind in ("float", "int"):
        return float(_check_number(value, key, where)) if key.kind == "float" else \
            _check_number(value, key, where, integer=True)
    if key.kind in ("floats", "ints"):
        items = value if isinstance(value, list) else [value]
        if not items:
            raise ConfigError(f"{where}: empty list")
        checked = [_check_number(v, key, f"{where}[{i}]", integer=key.kind == "ints") for i, v in enumerate(items)]
        return checked if isinstance(value, list) else checked[0]
    if key.kind == "matrix":
        if not isinstance(value, list) or not value or not all(isinstance(r, list) for r in value):
            raise ConfigError(f"{where}: expected a list of rows (a matrix), got {value!r}")
        if len({len(r) for r in value}) != 1:
            raise ConfigError(f"{where}: rows have different lengths")
        return [[_check_number(v, key, f"{where}[{i}][{j}]") for j, v in enumerate(r)] for i, r in enumerate(value)]
    raise AssertionError(key.kind)


def _validate_schedule(entries, source: str) -> list[dict]:
    """``[[schedule]]``: control-channel commands at control times ``t`` (s); fields are checked at build."""
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(f"{source}: [[schedule]] must be an array of tables (each with t and cmd)")
    out = []
    for k, entry in enumerate(entries):
        where = f"{source}: [[schedule]] {k}"
        if "t" not in entry or "cmd" not in entry:
            raise ConfigError(f"{where}: needs 't' (control time, s) and 'cmd' (a control-channel command)")
        _check_number(entry["t"], Key("float", low=0.0), f"{where} t")
        out.append(dict(entry, t=float(entry["t"])))
    return out


def validate(raw: dict, source: str = "<config>") -> dict:
    """Check a parsed TOML document against :data:`SCHEMA`; return it with defaults filled in."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: top level must be a table")
    unknown = sorted(set(raw) - set(SCHEMA) - {"schedule"})
    if unknown:
        raise ConfigError(f"{source}: unknown section [{unknown[0]}]; sections: {sorted(SCHEMA)} and [[schedule]]")
    out: dict[str, dict] = {}
    for section, keys in SCHEMA.items():
        given = raw.get(section, {})
        if not isinstance(given, dict):
            raise ConfigError(f"{source}: [{section}] must be a table")
        bad = sorted(set(given) - set(keys))
        if section == "control" and "token" in bad:
            raise ConfigError(f"{source}: [control] token: a token is not kept in a run config (configs get copied "
                              "and shared); put it in a file only you can read (chmod 600) and set token_file, or "
                              "set RTCTL_CONTROL_TOKEN, or leave both out: the server then creates a private token "
                              "file for you")
        if bad:
            raise ConfigError(f"{source}: [{section}] unknown key '{bad[0]}'; allowed: {sorted(keys)}")
        values = {}
        for name, key in keys.items():
            where = f"{source}: [{section}] {name}"
            values[name] = _validate_value(given[name], key, where) if name in given else key.default
        out[section] = values
    out["schedule"] = _validate_schedule(raw.get("schedule", []), source)
    traj = raw.get("trajectory", {})
    kind = out["trajectory"]["type"]
    foreign = sorted(set(traj) - TRAJECTORY_KEYS[kind] - {"type"})
    if foreign:
        raise ConfigError(f"{source}: [trajectory] key '{foreign[0]}' does not apply to type '{kind}' "
                          f"(allowed: {sorted(TRAJECTORY_KEYS[kind])})")
    return out


def read_toml(path: str | Path, what: str = "config", error: type[ValueError] = ConfigError) -> dict:
    """The parsed TOML file; ``error`` names the file when it cannot be read or parsed."""
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: not valid TOML: {exc}") from None


def load_config(path: str | Path) -> dict:
    path = Path(path)
    raw = read_toml(path)
    cfg = validate(raw, str(path))
    cfg["_dir"] = str(path.resolve().parent)
    cfg["_source"] = str(path)
    return cfg


def bundled_config_path(name: str) -> Path:
    """A run config shipped with rtctl by name (``"demo"``, or a robot folder's ``"stewart"``,
    ``"jaw"``, ``"legged_biped"``, ...): ``rtctl/data/configs/NAME.toml`` or ``rtctl/plants/*/NAME.toml``."""
    from . import plants

    candidates = [DEMO_CONFIG.parent / f"{name}.toml",
                  *sorted(Path(plants.__file__).parent.glob(f"*/{name}.toml"))]
    for path in candidates:
        if path.is_file():
            return path
    known = sorted({p.stem for p in DEMO_CONFIG.parent.glob("*.toml")} |
                   {p.stem for p in Path(plants.__file__).parent.glob("*/*.toml")})
    raise FileNotFoundError(f"no bundled config {name!r}; bundled configs: {known}")


def _resolve_model_path(spec: str, base_dir: str | None) -> Path:
    candidate = Path(spec)
    if not candidate.is_absolute() and base_dir is not None:
        candidate = Path(base_dir) / candidate
    if candidate.suffix == ".urdf" or candidate.exists():
        return candidate
    return bundled_model_path(spec)


def _vector(value, n: int, where: str) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 0:
        return np.full(n, float(arr))
    if arr.shape != (n,):
        raise ConfigError(f"{where}: expected {n} values (one per actuated joint), got {arr.size}")
    return arr


def _check_motion_against_limits(safety, plant_cfg: dict, traj: dict, trajectory, q_start, src: str) -> None:
    """The same checks the control channel applies to a live request, applied to the config's own motion:
    initial position, a minimum-jerk move's start and goal inside the soft limits and its peaks within
    the velocity and acceleration limits, a sinusoid's range and peaks, spline waypoints."""
    checks = []
    if plant_cfg["initial_position"] is not None:
        checks.append(("[plant] initial_position", q_start))
    kind = traj["type"]
    if kind == "min_jerk":
        start, goal = np.asarray(trajectory.start, dtype=float), np.asarray(trajectory.goal, dtype=float)
        checks += [("[trajectory] start", start), ("[trajectory] goal", goal)]
    elif kind == "sinusoid":
        center, amplitude = np.asarray(trajectory.center), np.abs(np.asarray(trajectory.amplitude))
        checks += [("[trajectory] center - amplitude", center - amplitude),
                   ("[trajectory] center + amplitude", center + amplitude)]
    elif kind == "spline":
        checks += [(f"[trajectory] waypoints[{i}]", np.asarray(row, dtype=float))
                   for i, row in enumerate(np.atleast_2d(np.asarray(traj["waypoints"], dtype=float)))]
    for what, q in checks:
        problem = safety.position_violation(q, what)
        if problem:
            raise ConfigError(f"{src}: {problem}")
    if kind == "min_jerk":
        problem = safety.min_jerk_violation(trajectory.start, trajectory.goal, float(trajectory.duration))
        if problem:
            raise ConfigError(f"{src}: [trajectory] min_jerk: {problem}")
    elif kind == "sinusoid":
        problem = safety.oscillation_violation(trajectory.amplitude, trajectory.frequency)
        if problem:
            raise ConfigError(f"{src}: [trajectory] sinusoid: {problem}")


def build(cfg: dict):
    """Assemble model, plant, driver, controller, trajectory, safety and loop; return the loop."""
    from rtctl.drivers import Transmission, create_driver
    from rtctl.loops.controllers import create_controller
    from rtctl.loops.trajectories import create_trajectory
    from rtctl.plants import create_plant

    from .dynamics import Dynamics
    from .model import ModelError
    from .model.urdf import load_urdf
    from .rt.interfaces import actuated_indices
    from .rt.loop import ControlLoop
    from .rt.realtime import RealtimeSettings
    from .safety import SafetyMonitor

    src = cfg.get("_source", "<config>")
    robot, plant_cfg, drv, ctl, traj, loop, saf = (cfg[s] for s in
                                                    ("robot", "plant", "driver", "controller", "trajectory",
                                                     "loop", "safety"))
    base = None if robot["floating_base"] == "fixed" else robot["floating_base"]
    try:
        from .registry import ROBOTS
        if robot["model"] in ROBOTS.names():  # a named robot model (rtctl.registry.ROBOTS)
            model, plant_model = ROBOTS.get(robot["model"])(), ROBOTS.get(robot["model"])()
        else:
            path = _resolve_model_path(robot["model"], cfg.get("_dir"))
            model = load_urdf(path, base)
            plant_model = load_urdf(path, base)
    except (ModelError, FileNotFoundError) as exc:
        raise ConfigError(f"{src}: [robot] model: {exc}") from None
    q_idx, v_idx, names = actuated_indices(model)
    n = len(v_idx)

    def wrap(section, fn):
        try:
            return fn()
        except ConfigError:
            raise
        except ValueError as exc:
            raise ConfigError(f"{src}: [{section}] {exc}") from None

    transmission = wrap("driver", lambda: Transmission(
        n, ratio=drv["gear_ratio"], coupling=drv["coupling"], rotor_inertia=drv["rotor_inertia"]))
    if drv["rotor_inertia"] is not None:
        armature = np.zeros(model.nv)
        armature[v_idx] = transmission.armature()
        model.set_armature(armature)
        plant_model.set_armature(armature)

    def friction(value, name):
        full = np.zeros(model.nv)
        full[v_idx] = _vector(value, n, f"{src}: [plant] {name}")
        return full

    extra = {k: plant_cfg[k] for k in ("integrator", "substeps", "end_stops") if plant_cfg.get(k) is not None}
    if plant_cfg.get("end_stops") is not None and plant_cfg["type"] != "rigid_body":
        raise ConfigError(f"{src}: [plant] end_stops applies to plant type 'rigid_body' only")
    patient = {k: v for k, v in cfg["patient"].items() if v is not None}
    if patient and plant_cfg["type"] != "jaw":
        raise ConfigError(f"{src}: [patient] applies to plant type 'jaw' only")
    if patient:
        from .plants.jaw.model import PatientImpedance
        wrap("patient", lambda: PatientImpedance().replace(**patient))
    extra.update(patient)
    if plant_cfg["type"] == "legged":
        extra.update(forward_dynamics=plant_cfg.get("forward_dynamics", "aba"), contact=dict(cfg.get("contact", {})))
    elif plant_cfg.get("forward_dynamics", "aba") != "aba":
        raise ConfigError(f"{src}: [plant] forward_dynamics applies to plant type 'legged' only")
    plant = wrap("plant", lambda: create_plant(
        plant_cfg["type"], plant_model, **extra,
        viscous_friction=friction(plant_cfg["viscous_friction"], "viscous_friction"),
        coulomb_friction=friction(plant_cfg["coulomb_friction"], "coulomb_friction"),
        coulomb_velocity_scale=plant_cfg["coulomb_velocity_scale"], mass_scale=plant_cfg["mass_scale"],
        payload_mass=plant_cfg["payload_mass"], payload_frame=plant_cfg["payload_frame"],
        payload_offset=plant_cfg["payload_offset"]))
    q0 = plant.q.copy()  # the plant's initial state: the neutral configuration (a mechanism's home pose)
    if plant_cfg["initial_position"] is not None:
        q0[q_idx] = _vector(plant_cfg["initial_position"], n, f"{src}: [plant] initial_position")
    plant.reset(q0)
    period = 1.0 / loop["rate_hz"]
    if drv["backend"] == "dynamixel":
        if not drv["port"]:
            raise ConfigError(f"{src}: [driver] backend 'dynamixel' needs 'port' (e.g. /dev/ttyUSB0)")
        ids = drv["servo_ids"]
        driver = wrap("driver", lambda: create_driver(
            "dynamixel", model, port=drv["port"], baudrate=drv["baudrate"], mode=drv["mode"],
            ids=None if ids is None else (ids if isinstance(ids, list) else [ids]), servo_model=drv["servo_model"],
            transmission=transmission, read_timeout=drv["read_timeout"], retries=drv["retries"],
            max_failed_cycles=drv["max_failed_cycles"]))
    elif drv["backend"] in ("can_mit", "cia402"):
        from rtctl.drivers.can import driver_from_config
        driver = wrap("driver", lambda: driver_from_config(drv, model, transmission, src))
    else:
        driver = None
    driver = driver or wrap("driver", lambda: create_driver(
        drv["backend"], model, plant=plant, period=period, mode=drv["mode"], transmission=transmission,
        torque_limit=drv["torque_limit"], position_noise=drv["position_noise"],
        velocity_noise=drv["velocity_noise"], effort_noise=drv["effort_noise"],
        encoder_counts=drv["encoder_counts"], latency_cycles=drv["latency_cycles"], seed=drv["seed"]))
    dyn = Dynamics(model)
    kp = ctl["kp"]
    if kp is None:
        if ctl["type"] not in ("computed_torque", "floating_base_computed_torque", "stewart_computed_torque",
                               "geared_computed_torque", "quadruped_tail_ffpd", "quadruped_tail_open_loop",
                               "jaw_computed_torque"):
            raise ConfigError(f"{src}: [controller] kp is required for type '{ctl['type']}' (a torque gain in "
                              "N m/rad per joint; it depends on the robot's inertia)")
        kp = 400.0
    extra = {"period": 1.0 / loop["rate_hz"]} if ctl["type"] == "quadruped_tail_open_loop" else {}  # its clock
    if ctl["type"] in ("legged_ff_pd", "legged_computed_torque"):  # the plant's ground model in tau^F (eq. 26)
        if plant_cfg["type"] != "legged":
            raise ConfigError(f"{src}: [controller] type '{ctl['type']}' needs plant type 'legged'")
        extra["contact"] = plant.contact_model
    controller = wrap("controller", lambda: create_controller(ctl["type"], dyn, kp=kp, kd=ctl["kd"], **extra))
    params = {k: traj[k] for k in TRAJECTORY_KEYS[traj["type"]] if traj[k] is not None}
    if traj["type"] == "jaw_cpg":
        if isinstance(params.get("frequency"), list):
            raise ConfigError(f"{src}: [trajectory] frequency: the chewing CPG has one frequency (Hz)")
        params["limits"] = {k: v for k, v in cfg["therapist"].items() if v is not None}
    if traj["type"] == "min_jerk":
        params.setdefault("start", q0[q_idx].tolist())
        if "goal" not in params or "duration" not in params:
            raise ConfigError(f"{src}: [trajectory] min_jerk needs 'goal' and 'duration'")
    trajectory = wrap("trajectory", lambda: create_trajectory(traj["type"], **params))
    if trajectory.n != n:
        raise ConfigError(f"{src}: [trajectory] has {trajectory.n} joints, the robot has {n} actuated joints")
    if hasattr(trajectory, "initial_state"):  # a gait starts the plant on its planned state, base included
        if plant_cfg["initial_position"] is not None:
            raise ConfigError(f"{src}: [plant] initial_position: trajectory '{traj['type']}' sets the initial state")
        wrap("trajectory", lambda: plant.reset(*trajectory.initial_state()))
    if cfg["therapist"]["max_force"] is not None:  # the therapist's force limit: the safety clamp enforces it
        if traj["type"] != "jaw_cpg":
            raise ConfigError(f"{src}: [therapist] applies to the jaw robot's chewing CPG (trajectory 'jaw_cpg')")
        model.effort_limit[v_idx] = np.minimum(model.effort_limit[v_idx], cfg["therapist"]["max_force"])
    safety = wrap("safety", lambda: SafetyMonitor(
        model, position_margin=saf["position_margin"], velocity_scale=saf["velocity_scale"],
        safe_mode=saf["safe_mode"],
        damping_gain=None if saf["damping_gain"] is None else _vector(saf["damping_gain"], n,
                                                                      f"{src}: [safety] damping_gain"),
        watchdog_cycles=saf["watchdog_cycles"], effort_clamp=saf["effort_clamp"],
        acceleration_limit=None if saf["acceleration_limit"] is None else _vector(
            saf["acceleration_limit"], n, f"{src}: [safety] acceleration_limit")))
    _check_motion_against_limits(safety, plant_cfg, traj, trajectory, q0[q_idx], src)
    realtime = RealtimeSettings(priority=loop["realtime_priority"], cpus=loop["cpus"],
                                lock_memory=loop["lock_memory"], disable_gc=loop["disable_gc"])
    control_loop = ControlLoop(model=model, driver=driver, controller=controller, trajectory=trajectory,
                               safety=safety, rate_hz=loop["rate_hz"], overrun_policy=loop["overrun_policy"],
                               max_consecutive_overruns=loop["max_consecutive_overruns"], pace=loop["pace"],
                               realtime=realtime)
    if cfg.get("telemetry", {}).get("enabled") or cfg.get("control", {}).get("enabled"):
        from .telemetry.wiring import wire
        wrap("telemetry", lambda: wire(control_loop, cfg.get("telemetry", {}), cfg.get("control", {})))
    if cfg.get("schedule"):
        from .telemetry.control import CommandSchedule, ControlServer, Refused
        server = getattr(control_loop, "control", None)
        if server is None:
            c = SCHEMA["control"]
            limits = {k: cfg.get("control", {}).get(k, c[k].default)
                      for k in ("kp_max", "kd_max", "frequency_max", "duration_max")}
            server = ControlServer(control_loop, **limits)  # validation and apply only: no socket
        control_loop.schedule = CommandSchedule(server, cfg["schedule"])
        try:
            control_loop.schedule.check()
        except Refused as exc:
            raise ConfigError(f"{src}: {exc}") from None
    return control_loop


def session_loop(config, duration: float | None = None):
    """``(loop, cfg)`` of a config (path or validated dict) built to run offline (``pace`` off) for
    ``duration`` seconds (default: its own), as the jaw session records it."""
    cfg = load_config(config) if not isinstance(config, dict) else config
    if duration is not None:
        cfg["loop"]["duration"] = duration
    cfg["loop"]["pace"] = False
    return build(cfg), cfg
