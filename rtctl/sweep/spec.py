"""Sweep files: a base run config, the parameters to vary, how to sample them, the metrics to keep.

A sweep is a TOML file::

    [sweep]
    base = "robot.toml"          # a run config (path relative to this file), or "demo" for the bundled one
    method = "grid"              # grid | zip | random | latin_hypercube
    samples = 64                 # random / latin_hypercube: number of runs
    seed = 0                     # random / latin_hypercube: reproducible draws
    duration = 2.0               # optional: override [loop] duration of every run (s of control time)
    metrics = ["tracking_rms", "peak_effort"]   # optional: columns to keep (default: all)

    [[sweep.parameter]]
    path = "plant.mass_scale"    # SECTION.KEY of the run config
    values = [0.8, 0.9, 1.0]     # grid / zip: the values (scalars or per-joint lists)

    [[sweep.parameter]]
    path = "controller.kp"
    low = 100.0                  # random / latin_hypercube: the range ...
    high = 900.0
    log = true                   # ... sampled uniformly in log space

    [backend]
    kind = "local"               # local (process pool) | dask | sequential (in this process)
    workers = 0                  # local: worker processes (0 = one per core); dask LocalCluster size
    address = ""                 # dask: scheduler address, e.g. "tls://10.0.0.5:8786" ("" = a LocalCluster)
    tls_ca_file = "ca.pem"       # dask: the client's TLS set-up (paths relative to this file), needs tls://
    tls_cert = "client.pem"
    tls_key = "client-key.pem"
    run_timeout = 60.0           # optional: wall-clock limit of each run's simulation (s; default: none)

``grid`` runs the Cartesian product of the value lists, ``zip`` runs them
side by side (equal lengths: an explicit list of runs). Every generated run
config is validated by :func:`rtctl.config.validate` before anything runs; an
error names the sweep file, the parameter and the value.

``run_timeout`` is cooperative and the same on every backend: a run whose
simulation is still going after that many seconds of wall time (counted from
the end of its first cycle: build and one-off set-up excluded) stops at a
cycle boundary and is recorded as ``timeout`` with the metrics of the cycles
that ran. It is an execution setting like ``workers``: it does not change the
run ids, so a resumed sweep keeps its timeout rows (``--fresh`` re-runs them).

An open Dask scheduler runs any code sent to it, for anyone who reaches its
port (other users of this machine reach a loopback one): an ``address`` must
be ``tls://`` (with ``tls_ca_file`` and ``tls_cert``, and ``tls_key`` unless the
key is in the certificate file, or distributed's ``distributed.comm.tls``
configuration). Without an address, the LocalCluster makes its own TLS
credentials.
"""
from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..config import ConfigError, read_toml, section_keys, validate

METHODS = ("grid", "zip", "random", "latin_hypercube")
BACKENDS = ("local", "dask", "sequential")
METRICS = (
    "tracking_rms",       # max over joints of the per-joint RMS tracking error (rad or m)
    "tracking_max",       # max over joints and cycles of |q_d - q|
    "peak_effort",        # max over joints and cycles of the applied |effort| (N m or N)
    "actuator_energy",    # integral of sum_i |effort_i v_i| dt: mechanical work done by the actuators (J)
    "trips",              # 1 if the safety monitor tripped, else 0
    "compute_p50_us",     # median compute time of one control cycle
    "compute_p99_us",
    "overruns",
    "cycles",
    "wall_s",             # wall time of the run (build + simulation)
)


class SweepError(ValueError):
    """A problem with a sweep file; the message names the file, the entry and the value."""


@dataclass
class Parameter:
    path: str
    values: list | None = None
    low: float | None = None
    high: float | None = None
    log: bool = False
    integer: bool = False

    @property
    def column(self) -> str:
        return f"param.{self.path}"


@dataclass
class Sweep:
    source: str
    base: dict                                   # the base run config as written (TOML tables, no defaults)
    base_dir: str
    parameters: list[Parameter]
    method: str = "grid"
    samples: int | None = None
    seed: int = 0
    duration: float | None = None
    metrics: tuple = METRICS
    backend: dict = field(default_factory=lambda: {"kind": "local", "workers": 0, "address": "",
                                                   "run_timeout": None, "tls": None})

    def runs(self) -> list[dict]:
        """The runs: ``[{"run_id", "params": {path: value}, "config": run config}, ...]`` in a fixed order."""
        assignments = _assignments(self)
        base_digest = _digest(self.base)
        runs = []
        for index, params in enumerate(assignments):
            raw = copy.deepcopy(self.base)
            for path, value in params.items():
                section, key = path.split(".")
                raw.setdefault(section, {})[key] = value
            if self.duration is not None:
                raw.setdefault("loop", {})["duration"] = self.duration
            raw.setdefault("loop", {})["pace"] = False
            for section in ("telemetry", "control"):
                raw.setdefault(section, {})["enabled"] = False
            where = f"{self.source}: run {index} ({_describe(params)})"
            try:
                checked = validate(raw, where)
            except ConfigError as exc:
                raise SweepError(str(exc)) from None
            checked["_dir"], checked["_source"] = self.base_dir, where
            run_id = _digest({"base": base_digest, "params": params, "duration": self.duration})[:16]
            runs.append({"run_id": run_id, "index": index, "params": params, "config": checked,
                         "run_timeout": self.backend.get("run_timeout")})
        ids = [r["run_id"] for r in runs]
        if len(set(ids)) != len(ids):
            raise SweepError(f"{self.source}: two runs have the same parameter values; each run must differ")
        return runs


def _describe(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def _assignments(sweep: Sweep) -> list[dict]:
    params = sweep.parameters
    if sweep.method == "grid":
        combos = itertools.product(*(p.values for p in params))
        return [{p.path: v for p, v in zip(params, combo)} for combo in combos]
    if sweep.method == "zip":
        return [{p.path: p.values[i] for p in params} for i in range(len(params[0].values))]
    n, d = sweep.samples, len(params)
    if sweep.method == "random":
        unit = np.random.default_rng(sweep.seed).random((n, d))
    else:
        from scipy.stats import qmc
        unit = qmc.LatinHypercube(d=d, seed=sweep.seed).random(n)
    out = []
    for row in unit:
        run = {}
        for p, u in zip(params, row):
            if p.log:
                value = math.exp(math.log(p.low) + u * (math.log(p.high) - math.log(p.low)))
            else:
                value = p.low + u * (p.high - p.low)
            run[p.path] = int(round(value)) if p.integer else float(value)
        out.append(run)
    return out


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SweepError(f"{where}: expected a finite number, got {value!r}")
    return value


def _parameter(entry, index: int, method: str, source: str, base: dict) -> Parameter:
    where = f"{source}: [[sweep.parameter]] {index}"
    if not isinstance(entry, dict):
        raise SweepError(f"{where}: must be a table with 'path' and values or a range")
    unknown = sorted(set(entry) - {"path", "values", "low", "high", "log"})
    if unknown:
        raise SweepError(f"{where}: unknown key '{unknown[0]}'; allowed: path, values, low, high, log")
    path = entry.get("path")
    if not isinstance(path, str) or path.count(".") != 1:
        raise SweepError(f"{where}: 'path' must be SECTION.KEY of the run config, got {path!r}")
    section, key = path.split(".")
    try:
        keys = section_keys(base, section)
    except ConfigError:
        raise SweepError(f"{where}: path '{path}': unknown section [{section}] for the base config") from None
    if key not in keys:
        raise SweepError(f"{where}: path '{path}': [{section}] has no key '{key}'; keys: {sorted(keys)}")
    where = f"{where} ({path})"
    kind = keys[key].kind
    p = Parameter(path=path, integer=kind in ("int", "ints"))
    if method in ("grid", "zip"):
        if "values" not in entry or set(entry) & {"low", "high", "log"}:
            raise SweepError(f"{where}: method '{method}' takes 'values' (a list), not a range")
        values = entry["values"]
        if not isinstance(values, list) or not values:
            raise SweepError(f"{where}: 'values' must be a non-empty list, got {values!r}")
        p.values = values
        return p
    if "values" in entry:
        raise SweepError(f"{where}: method '{method}' samples a range: give 'low' and 'high', not 'values'")
    if kind not in ("float", "int", "floats", "ints"):
        raise SweepError(f"{where}: a {kind} key cannot be sampled from a range; use method 'grid' with values")
    for name in ("low", "high"):
        if name not in entry:
            raise SweepError(f"{where}: method '{method}' needs '{name}'")
    p.low, p.high = _number(entry["low"], f"{where} low"), _number(entry["high"], f"{where} high")
    if not p.low < p.high:
        raise SweepError(f"{where}: needs low < high, got low={p.low!r}, high={p.high!r}")
    p.log = entry.get("log", False)
    if not isinstance(p.log, bool):
        raise SweepError(f"{where}: 'log' must be true or false, got {p.log!r}")
    if p.log and p.low <= 0:
        raise SweepError(f"{where}: log sampling needs low > 0, got {p.low!r}")
    return p


def load_sweep(path: str | Path) -> Sweep:
    """Read and check a sweep file (see the module docstring); the runs are validated here too."""
    from ..config import DEMO_CONFIG

    path = Path(path)
    source = str(path)
    raw = read_toml(path, "sweep file", SweepError)
    unknown = sorted(set(raw) - {"sweep", "backend"})
    if unknown:
        raise SweepError(f"{source}: unknown section [{unknown[0]}]; sections: backend, sweep")
    sw = raw.get("sweep")
    if not isinstance(sw, dict):
        raise SweepError(f"{source}: needs a [sweep] table")
    allowed = {"base", "method", "samples", "seed", "duration", "metrics", "parameter"}
    bad = sorted(set(sw) - allowed)
    if bad:
        raise SweepError(f"{source}: [sweep] unknown key '{bad[0]}'; allowed: {sorted(allowed)}")
    base_spec = sw.get("base")
    if not isinstance(base_spec, str):
        raise SweepError(f"{source}: [sweep] base: the run config to start from (a path, or \"demo\"), "
                         f"got {base_spec!r}")
    base_path = DEMO_CONFIG if base_spec == "demo" else (path.resolve().parent / base_spec)
    try:
        base = read_toml(base_path)
        validate(base, str(base_path))
    except ConfigError as exc:
        raise SweepError(f"{source}: [sweep] base: {exc}") from None
    method = sw.get("method", "grid")
    if method not in METHODS:
        raise SweepError(f"{source}: [sweep] method must be one of {list(METHODS)}, got {method!r}")
    entries = sw.get("parameter")
    if not isinstance(entries, list) or not entries:
        raise SweepError(f"{source}: give at least one [[sweep.parameter]]")
    params = [_parameter(e, i, method, source, base) for i, e in enumerate(entries)]
    if len({p.path for p in params}) != len(params):
        raise SweepError(f"{source}: a parameter path appears twice")
    if method == "zip" and len({len(p.values) for p in params}) != 1:
        raise SweepError(f"{source}: method 'zip' needs value lists of equal length, got "
                         + ", ".join(f"{p.path}: {len(p.values)}" for p in params))
    samples = sw.get("samples")
    if method in ("random", "latin_hypercube"):
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
            raise SweepError(f"{source}: [sweep] samples: method '{method}' needs a positive integer, got {samples!r}")
    elif samples is not None:
        raise SweepError(f"{source}: [sweep] samples applies to random and latin_hypercube only")
    seed = sw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise SweepError(f"{source}: [sweep] seed must be an integer >= 0, got {seed!r}")
    duration = sw.get("duration")
    if duration is not None and not (_number(duration, f"{source}: [sweep] duration") > 0):
        raise SweepError(f"{source}: [sweep] duration must be > 0, got {duration!r}")
    metrics = sw.get("metrics", list(METRICS))
    if not isinstance(metrics, list) or not metrics or any(m not in METRICS for m in metrics):
        raise SweepError(f"{source}: [sweep] metrics: a list drawn from {list(METRICS)}, got {metrics!r}")
    backend = _backend(raw.get("backend", {}), source, path.resolve().parent)
    sweep = Sweep(source=source, base=base, base_dir=str(base_path.resolve().parent), parameters=params, method=method, samples=samples, seed=seed,
                  duration=None if duration is None else float(duration), metrics=tuple(metrics), backend=backend)
    sweep.runs()  # validate every generated run config now, before anything is started
    return sweep


TLS_KEYS = ("tls_ca_file", "tls_cert", "tls_key")
BACKEND_KEYS = ("kind", "workers", "address", "run_timeout", *TLS_KEYS)


def _backend(raw, source: str, base_dir: Path = Path(".")) -> dict:
    if not isinstance(raw, dict):
        raise SweepError(f"{source}: [backend] must be a table")
    bad = sorted(set(raw) - set(BACKEND_KEYS))
    if bad:
        raise SweepError(f"{source}: [backend] unknown key '{bad[0]}'; allowed: {', '.join(sorted(BACKEND_KEYS))}")
    out = {"kind": raw.get("kind", "local"), "workers": raw.get("workers", 0), "address": raw.get("address", ""),
           "run_timeout": raw.get("run_timeout")}
    if out["kind"] not in BACKENDS:
        raise SweepError(f"{source}: [backend] kind must be one of {list(BACKENDS)}, got {out['kind']!r}")
    w = out["workers"]
    if isinstance(w, bool) or not isinstance(w, int) or w < 0:
        raise SweepError(f"{source}: [backend] workers must be an integer >= 0 (0: one per core), got {w!r}")
    if not isinstance(out["address"], str):
        raise SweepError(f"{source}: [backend] address must be a string like \"tls://host:8786\"")
    tls = {k: raw[k] for k in TLS_KEYS if k in raw}
    if tls:
        for key, value in tls.items():
            if not isinstance(value, str) or not value:
                raise SweepError(f"{source}: [backend] {key} must be a path (a PEM file), got {value!r}")
        missing = [k for k in ("tls_ca_file", "tls_cert") if k not in tls]
        if missing:
            raise SweepError(f"{source}: [backend] TLS needs tls_ca_file and tls_cert (and tls_key unless the "
                             f"key is in the certificate file); missing {', '.join(missing)}")
        tls = {k: str(base_dir / tls[k]) if k in tls else None for k in TLS_KEYS}
    out["tls"] = tls or None
    limit = out["run_timeout"]
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not math.isfinite(limit) or limit <= 0:
            raise SweepError(f"{source}: [backend] run_timeout: the wall-clock limit of a run must be a finite "
                             f"number of seconds > 0, got {limit!r}")
        out["run_timeout"] = float(limit)
    return out
