"""A run config's ``[[sensors]]`` tables and its ``[estimator]``.

Each ``[[sensors]]`` table selects a sensor backend by ``backend`` (an entry point of ``rtctl.sensors``, default
``sim``: the simulated plant measured in process) and gives its keys (:class:`rtctl.drivers.sensor.Sensor`'s
``Options`` and the backend's own)::

    [[sensors]]
    name = "imu"
    kind = "imu"
    frame = "trunk"          # a link or frame of the model
    max_age = 0.01           # s without a sample before the robot goes to its safe state

``[estimator]`` (optional) selects a state estimator by ``type`` (an entry point of ``rtctl.estimators``) and
names the sensors it uses in its own keys; with one, every controller sees the estimated base
(:mod:`rtctl.rt.estimation`).
"""
from __future__ import annotations

from .options import ConfigError, Key, check_table, schema_keys, show
from .registry import ESTIMATORS, SENSORS

SENSOR_SELECTOR, SENSOR_DEFAULT = "backend", "sim"
ESTIMATOR_SELECTOR = "type"


def sensor_tables(raw: dict, source: str) -> list[tuple[str, dict]]:
    """``(where, table)`` of each ``[[sensors]]`` table (none: [])."""
    tables = raw.get("sensors", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ConfigError(f"{source}: [[sensors]] must be an array of tables (one per sensor)")
    out = []
    for k, table in enumerate(tables):
        name = table.get("name")
        out.append((f"{source}: [[sensors]] {k}" + (f" ({show(name)})" if isinstance(name, str) else ""), table))
    return out


def _sensor_class(table: dict, where: str):
    try:
        return SENSORS.get(table.get(SENSOR_SELECTOR, SENSOR_DEFAULT))
    except ValueError as exc:
        raise ConfigError(f"{where} {SENSOR_SELECTOR}: {exc}") from None


def sensor_keys(cls) -> dict[str, Key]:
    """The keys of a ``[[sensors]]`` table of backend ``cls``: its selector, then its ``Options``."""
    return {SENSOR_SELECTOR: Key("str", SENSOR_DEFAULT), **schema_keys(cls.Options)}


def validate_sensors(raw: dict, source: str) -> list[dict]:
    """Every ``[[sensors]]`` table checked against its backend's schema (defaults filled in), names unique,
    each kind one its backend measures; ConfigError naming the file, the table and the key."""
    out, names = [], {}
    for where, table in sensor_tables(raw, source):
        cls = _sensor_class(table, where)
        checked = check_table(table, sensor_keys(cls), where, owner=f"sensor backend '{cls.registered_name}'")
        if checked["kind"] not in cls.kinds:
            raise ConfigError(f"{where} kind: {show(checked['kind'])}: backend '{cls.registered_name}' measures "
                              f"{list(cls.kinds)}")
        if checked["name"] in names:
            raise ConfigError(f"{where} name: {show(checked['name'])} is also the name of [[sensors]] "
                              f"{names[checked['name']]}")
        names[checked["name"]] = len(out)
        out.append(checked)
    return out


def _estimator_class(table: dict, where: str):
    if ESTIMATOR_SELECTOR not in table:
        raise ConfigError(f"{where}: needs '{ESTIMATOR_SELECTOR}', one of {ESTIMATORS.names()}")
    try:
        return ESTIMATORS.get(table[ESTIMATOR_SELECTOR])
    except ValueError as exc:
        raise ConfigError(f"{where} {ESTIMATOR_SELECTOR}: {exc}") from None


def validate_estimator(raw: dict, source: str) -> dict | None:
    """``[estimator]`` checked against its type's schema, or None when the config has none."""
    if "estimator" not in raw:
        return None
    where, table = f"{source}: [estimator]", raw["estimator"]
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    cls = _estimator_class(table, where)
    return check_table(table, {ESTIMATOR_SELECTOR: Key("str", required=True), **schema_keys(cls.Options)}, where,
                       owner=f"estimator '{cls.registered_name}'")


def build_sensors(cfg: dict, context) -> list:
    """The sensors of a validated config over ``context.model`` (and its plant, for a simulated one); also
    ``context.sensors`` by name. A value a backend refuses (a frame the model does not have) is a ConfigError
    naming the file, the table and what was wrong."""
    sensors = []
    for k, table in enumerate(cfg.get("sensors", [])):
        where = f"{context.source}: [[sensors]] {k} ({show(table['name'])})"
        cls = SENSORS.get(table[SENSOR_SELECTOR])
        options = {key: value for key, value in table.items() if key != SENSOR_SELECTOR}
        try:
            sensors.append(cls.from_config(options, context))
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    context.sensors = {s.options.name: s for s in sensors}
    return sensors


def build_estimator(cfg: dict, context):
    """The ``[estimator]`` of a validated config over ``context`` (its model and sensors), or None."""
    table = cfg.get("estimator")
    if table is None:
        return None
    cls = ESTIMATORS.get(table[ESTIMATOR_SELECTOR])
    options = {key: value for key, value in table.items() if key != ESTIMATOR_SELECTOR}
    try:
        return cls.from_config(options, context)
    except ValueError as exc:
        raise ConfigError(f"{context.source}: [estimator] {exc}") from None
