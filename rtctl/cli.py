"""The ``rtctl`` command line."""
from __future__ import annotations

import argparse
import errno
import os
import sys
import time
import warnings
from pathlib import Path

from . import MODELS_DIR, _numba_cache, bundled_model_path
from .options import EXIT_USAGE, Parser
from .rt.signals import StopSignal, StopSignals, exit_status, signal_name, stop_requests
from .rt.signals import hold as hold_signals, release as release_signals


def load_model(spec: str, floating_base: str | None, inertia: str = "warn"):
    """A URDF file, a bundled URDF by name, or a named robot model (:data:`rtctl.registry.ROBOTS`)."""
    from .model.urdf import load_urdf
    from .options import did_you_mean
    from .registry import ROBOTS, robot_model

    path = Path(spec)
    if path.exists() or path.suffix:
        return load_urdf(path, floating_base, inertia=inertia)
    bundled = sorted(p.stem for p in MODELS_DIR.glob("*.urdf"))
    if spec in bundled:
        return load_urdf(bundled_model_path(spec), floating_base, inertia=inertia)
    robots = ROBOTS.names()
    if spec in robots:
        if floating_base is not None:
            raise ValueError(f"robot model {spec!r} declares its own base; --floating-base is for URDF files")
        return robot_model(spec)
    raise FileNotFoundError(f"no URDF file, bundled model or robot model named {spec!r}"
                            f"{did_you_mean(spec, bundled + robots)}; bundled models: {bundled}; "
                            f"robot models: {robots}")


def _cmd_info(args) -> int:
    """The model report (what was warned, repaired, coupled or missing), then the tree."""
    from .model.report import model_report

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")             # the report lists what the warnings would say
        model = load_model(args.model, args.floating_base, args.inertia)
    print(model_report(model))
    print()
    print(model.describe())
    return 0


EXIT_OK, EXIT_TRIPPED, EXIT_OPERATOR_STOP, EXIT_TELEMETRY_LOST = 0, 3, 4, 5
EXIT_INTERRUPTED = 130           # a KeyboardInterrupt that no stop signal of ours raised (128 + SIGINT)


class CompileProgress:
    """Says on ``stream`` what numba compiles for rtctl while a command runs: kernels with no cache entry for
    their argument types, or whose entry is out of date because their module, a module it imports or a
    function they reach changed (:mod:`rtctl._kernel_deps`; all of rtctl's kernels take about a minute);
    a run that loads everything from the cache prints nothing. On a terminal one line is rewritten per
    kernel; elsewhere one line when compiling starts and one when the command is done. A stop signal during
    a compile is raised once it has finished (:func:`rtctl.rt.signals.hold`). A command that never imports
    numba (``rtctl control``, ``rtctl --version``) does not import it for this: the listener is registered
    when numba is imported (:func:`rtctl._numba_cache.when_configured`)."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.count, self.start = 0, None
        self.listener = None

    def __enter__(self):
        _numba_cache.when_configured(self._register)
        return self

    def _register(self) -> None:
        from numba.core import event

        progress = self

        class Listener(event.Listener):
            def on_start(self, ev) -> None:
                progress.on_start(ev)

            def on_end(self, ev) -> None:
                progress.on_end(ev)

        self.listener = Listener()
        event.register("numba:compile", self.listener)

    def __exit__(self, *exc):
        _numba_cache.cancel(self._register)
        if self.listener is None:
            return
        import numba
        from numba.core import event

        event.unregister("numba:compile", self.listener)
        self.listener = None
        if self.count:
            end = "\n" if self.tty else ""
            later = ("later runs load them from the cache until they or the modules they import change"
                     if numba.config.CACHE_DIR else "uncached: compiled again at the next start")
            print(f"{end}rtctl: compiled {self.count} kernel{'s' if self.count != 1 else ''} in "
                  f"{time.monotonic() - self.start:.0f} s; {later}", file=self.stream, flush=True)

    def on_start(self, ev) -> None:
        import numba

        hold_signals()           # a stop signal while numba compiles is raised when it has finished
        func = getattr(ev.data["dispatcher"], "py_func", None)
        module = getattr(func, "__module__", "") or ""
        if module.partition(".")[0] != "rtctl":
            return
        if self.start is None:
            self.start = time.monotonic()
            why = ("not in the cache yet, or their module or one it imports changed; cached in "
                   f"{numba.config.CACHE_DIR}" if numba.config.CACHE_DIR else "uncached: at every start")
            print(f"rtctl: compiling numba kernels ({why}); `rtctl warm` compiles every bundled config's ahead, "
                  "one config per core", file=self.stream, flush=True)
        self.count += 1
        if self.tty:
            line = f"  [{self.count:3d}] {time.monotonic() - self.start:5.1f} s  {module}.{func.__name__}"
            print(f"\r{line[:100]:<100}", end="", file=self.stream, flush=True)

    def on_end(self, ev) -> None:
        release_signals()


def _run_config(path, duration: float | None, pace: bool | None) -> int:
    from .config import build, load_config

    cfg = load_config(path)
    if duration is not None:
        cfg["loop"]["duration"] = duration
    if pace is not None:
        cfg["loop"]["pace"] = pace
    loop = build(cfg)
    print(f"rtctl: running {cfg['_source']} -- {cfg['robot']['model']}, {cfg['controller']['type']}, "
          f"{' + '.join(t['backend'] for t in cfg.get('drivers', [cfg.get('driver')]))} driver, {cfg['loop']['rate_hz']:g} Hz, {cfg['loop']['duration']:g} s",
          flush=True)
    from .operator.wiring import close as close_telemetry, describe as describe_telemetry, lost as telemetry_lost
    with stop_requests():        # from here a stop signal ends the run in order and the report is printed
        describe_telemetry(loop)
        try:
            report = loop.run(duration=cfg["loop"]["duration"])
        finally:
            close_telemetry(loop)
        print(report.format(), flush=True)
        if report.operator_stop:
            print(f"rtctl: stopped by an operator e-stop and not re-armed: {report.trip_reason}", file=sys.stderr)
            return EXIT_OPERATOR_STOP
        if report.tripped and not cfg["safety"]["expect_trip"]:
            print(f"rtctl: the safe state tripped unexpectedly: {report.trip_reason}", file=sys.stderr)
            return EXIT_TRIPPED
        if cfg["safety"]["expect_trip"] and not report.tripped and not report.stopped_by:
            print("rtctl: the config expects a safety trip, but none happened", file=sys.stderr)
            return EXIT_TRIPPED
        if telemetry_lost(loop):
            print(f"rtctl: the telemetry stream was lost during the run: {telemetry_lost(loop)}", file=sys.stderr)
            return EXIT_TELEMETRY_LOST
        return EXIT_OK


def _cmd_demo(args) -> int:
    from .config import DEMO_CONFIG

    return _run_config(DEMO_CONFIG, args.duration, False if args.offline else None)


def _cmd_run(args) -> int:
    config = Path(args.config)
    if not config.exists() and config.suffix != ".toml" and "/" not in args.config:
        from .config import bundled_config_path
        config = bundled_config_path(args.config)  # a config shipped with rtctl, by name
    return _run_config(config, args.duration, False if args.offline else None)


def _cmd_jaw_session(args) -> int:
    from .config import session_loop
    from .plants.jaw.session import run_session

    result = run_session(*session_loop(args.config, args.duration), args.out)
    print(result.report.format())
    print()
    print(result.format())
    for path in result.files:
        print(f"rtctl jaw-session: wrote {path}")
    return EXIT_TRIPPED if result.report.tripped else EXIT_OK


def _cmd_sweep(args) -> int:
    """Run a sweep; Ctrl-C stops it with one line (no traceback), the finished rows kept, exit status 130."""
    try:
        from .sweep import load_sweep, run_sweep

        sweep = load_sweep(args.sweep)
        for key in ("backend", "workers", "address"):
            value = getattr(args, key)
            if value is not None:
                sweep.backend["kind" if key == "backend" else key] = value
        summary = run_sweep(sweep, args.out, resume=not args.fresh, progress=not args.no_progress)
    except KeyboardInterrupt as stop:  # a SweepInterrupted once the sweep has started
        if not hasattr(stop, "done"):  # before the sweep started, or a second Ctrl-C while it stopped
            print("rtctl sweep: interrupted; finished runs are kept: run the same command again to resume",
                  file=sys.stderr)
        elif stop.restored:
            print(f"rtctl sweep: interrupted before the first run finished; the earlier results in "
                  f"{stop.path} are kept", file=sys.stderr)
        else:
            again = "without --fresh " if args.fresh else ""
            print(f"rtctl sweep: interrupted after {stop.done} of {stop.total} runs; partial results in "
                  f"{stop.path}; run it again {again}to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(f"rtctl sweep: {summary.format()}")
    return EXIT_OK


def _cmd_sweep_report(args) -> int:
    from .sweep.report import missing_runs, sweep_report
    from .sweep.results import read_columns

    print(f"rtctl sweep-report: wrote {sweep_report(args.results, args.out, args.metrics, args.pareto)}")
    missing = missing_runs(args.results, len(read_columns(args.results)["run_id"]))
    if missing:
        print(f"rtctl sweep-report: warning: {missing}", file=sys.stderr)
    return EXIT_OK


def _cmd_warm(args) -> int:
    from .config import bundled_config_path, bundled_configs
    from .sweep.warm import warm

    configs = [Path(name) if Path(name).suffix == ".toml" or "/" in name else bundled_config_path(name)
               for name in (args.configs or bundled_configs())]
    start = time.perf_counter()
    rows = warm(configs, jobs=args.jobs, progress=not args.no_progress)
    for row in rows:
        what = f"{row['compiled']} kernels compiled" if row["status"] == "ok" else f"error: {row['reason']}"
        print(f"rtctl warm: {row['config']}: {what} ({row['seconds']:.1f} s)")
    failed = sum(row["status"] != "ok" for row in rows)
    print(f"rtctl warm: {len(rows) - failed} of {len(rows)} configs ready in {time.perf_counter() - start:.1f} s, "
          f"{sum(row['compiled'] for row in rows)} kernels compiled")
    return 1 if failed else EXIT_OK


def _cmd_identify(args) -> int:
    from .loops.identification import identify_command

    return identify_command(args)


def _cmd_export(args) -> int:
    """``rtctl export --ros2``: a recording as a rosbag2 (rtctl.telemetry.ros2), its robot described by the
    recording or by ``--robot`` (a run config's model and sensor mounts, or a URDF / named model)."""
    from .telemetry.description import robot_description
    from .telemetry.ros2 import export_ros2

    description = None
    if args.robot is not None:
        if Path(args.robot).suffix == ".toml":
            from .config import load_config, robot_of
            description = robot_description(*robot_of(load_config(args.robot)))
        else:
            description = robot_description(load_model(args.robot, args.floating_base))
    res = export_ros2(args.recording, args.out, description, tf_rate=args.tf_rate, progress=not args.no_progress)
    counts = ", ".join(f"{n} on {topic}" for topic, n in res["messages"].items())
    print(f"rtctl export: {res['path']}: {counts}; base pose: {res['base']}")
    for note in res["notes"]:
        print(f"rtctl export: note: {note}")
    return EXIT_OK


def require_subcommand(parser: argparse.ArgumentParser, subparsers, what: str = "command") -> None:
    """``parser`` given none of its ``subparsers`` says so in one line, naming the ones there are (argparse's
    own ``required=True`` prints the usage block and the subparsers' ``dest``)."""
    subparsers.required = False
    parser.set_defaults(func=lambda args: parser.error(f"missing {what}: one of {', '.join(subparsers.choices)}"))


class VersionAction(argparse.Action):
    """``--version``: argparse's, with the version read from the installed metadata only when asked for."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="show program's version number and exit"):
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from . import __version__

        print(f"rtctl {__version__}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    from .config import CORE_SCHEMA
    from .options import argument_type

    duration = argument_type(CORE_SCHEMA["loop"]["duration"])   # --duration: checked as [loop] duration is
    parser = Parser(prog="rtctl", description="Real-time robot controller framework.")
    parser.add_argument("--version", action=VersionAction)
    sub = parser.add_subparsers(dest="command")
    require_subcommand(parser, sub)
    info = sub.add_parser("info", help="print a model's report (DOFs, mass, base, massless subtrees, inertias "
                          "warned or repaired, mimic joints, missing limits) and its tree")
    info.add_argument("model", help="URDF file, a bundled model (arm7, quadruped12, humanoid, planar_biped, "
                                    "spatial_quadruped) or a robot model (stewart, jaw, grm3, quadruped_tail)")
    info.add_argument("--floating-base", choices=["free_flyer", "euler"], default=None,
                      help="give the root link a floating base (default: fixed to the world)")
    info.add_argument("--inertia", choices=["warn", "strict", "repair"], default="warn",
                      help="physically inconsistent inertias: keep and list them (warn), refuse the file "
                           "(strict), or replace each by the nearest consistent one (repair)")
    info.set_defaults(func=_cmd_info)
    for name, helptext, func in (
            ("demo", "run the bundled demo: 7-DOF arm, simulated plant, computed torque at 1 kHz", _cmd_demo),
            ("run", "run the control loop described by a TOML config", _cmd_run)):
        cmd = sub.add_parser(name, help=helptext)
        if name == "run":
            cmd.add_argument("config", help="TOML run configuration: a path, or the name of a bundled one "
                                             "(e.g. stewart, jaw, legged_biped)")
        cmd.add_argument("--duration", type=duration, default=None, help="override [loop] duration (s)")
        cmd.add_argument("--offline", action="store_true",
                         help="run cycles back to back instead of at wall-clock rate (same control time)")
        cmd.set_defaults(func=func)
    from .telemetry.cli import add_commands  # telemetry, record, recover, replay, plot
    for parent, subparsers in add_commands(sub):
        require_subcommand(parent, subparsers, "subcommand")
    from .operator.cli import add_commands as add_operator_commands  # dashboard, control
    add_operator_commands(sub)
    js = sub.add_parser("jaw-session", help="run a jaw-rehabilitation (chewing CPG) config offline, plot it, "
                        "and print tracking error and leg force per phase")
    js.add_argument("config", help="TOML run configuration with [trajectory] type = \"jaw_cpg\"")
    js.add_argument("--out", required=True, help="directory for legs.png, incisal.png, session.npz")
    js.add_argument("--duration", type=duration, default=None, help="override [loop] duration (s)")
    js.set_defaults(func=_cmd_jaw_session)
    wm = sub.add_parser("warm", help="compile every kernel the bundled configs (or the ones named) can reach, one "
                        "config per core, so that no later run compiles")
    wm.add_argument("configs", nargs="*", help="configs (.toml) or bundled config names (default: all bundled)")
    wm.add_argument("--jobs", type=argument_type("int", low=0), default=0, help="worker processes (0: one per core)")
    wm.add_argument("--no-progress", action="store_true")
    wm.set_defaults(func=_cmd_warm)
    sw = sub.add_parser("sweep", help="run many offline simulations of a config with varied parameters")
    sw.add_argument("sweep", help="sweep file (TOML): base config, parameters, sampling, metrics, backend")
    sw.add_argument("--out", required=True, help="results file (.parquet); re-running skips finished runs")
    sw.add_argument("--backend", choices=["local", "dask", "sequential"], default=None,
                    help="override [backend] kind (default from the file: local process pool)")
    sw.add_argument("--workers", type=int, default=None, help="override [backend] workers (0: one per core)")
    sw.add_argument("--address", default=None, help="override [backend] address (Dask scheduler)")
    sw.add_argument("--fresh", action="store_true", help="discard existing results instead of resuming")
    sw.add_argument("--no-progress", action="store_true")
    sw.set_defaults(func=_cmd_sweep)
    rep = sub.add_parser("sweep-report", help="plot sweep results: metric vs parameter, Pareto front")
    rep.add_argument("results", help="results file written by rtctl sweep")
    rep.add_argument("--out", required=True, help="image file (png, pdf, svg)")
    rep.add_argument("--metrics", nargs="+", default=["tracking_rms", "peak_effort", "actuator_energy"])
    rep.add_argument("--pareto", nargs=2, metavar=("X", "Y"), default=["actuator_energy", "tracking_rms"],
                     help="the two metrics (both minimised) of the Pareto plot")
    rep.set_defaults(func=_cmd_sweep_report)
    ex = sub.add_parser("export", help="convert a recording for other tools: --ros2 writes a rosbag2 (joint states, "
                        "TF from rtctl's kinematics, IMU and wrench messages, the robot description)")
    ex.add_argument("recording", help="MCAP recording (rtctl record)")
    ex.add_argument("out", help="the bag to write: a new directory")
    ex.add_mutually_exclusive_group(required=True).add_argument(
        "--ros2", action="store_true", help="a rosbag2 (MCAP storage, CDR), written without ROS")
    ex.add_argument("--robot", default=None, help="describe the robot by this run config (.toml: its model and "
                    "sensor mounts), URDF, bundled model or robot model instead of the recording's description")
    ex.add_argument("--floating-base", choices=["free_flyer", "euler", "planar"], default=None,
                    help="with --robot URDF: the root link's floating base (default: fixed to the world)")
    ex.add_argument("--tf-rate", type=argument_type("float", low=0.0), default=100.0,
                    help="TF messages per second of control time (default 100; 0: one per sample)")
    ex.add_argument("--no-progress", action="store_true")
    ex.set_defaults(func=_cmd_export)
    ident = sub.add_parser("identify", help="fit a URDF's inertial parameters and joint friction to a recorded run "
                           "(rtctl record: measured q, commanded effort); write the identified URDF and a report")
    ident.add_argument("recording", help="MCAP recording of the run (an excitation trajectory moves every joint)")
    ident.add_argument("--model", required=True, help="the robot's URDF (fixed base)")
    ident.add_argument("--out", default=None, help="identified URDF (default: RECORDING_identified.urdf next to "
                       "the recording); the report is written beside it as .txt")
    ident.add_argument("--cutoff", type=float, default=5.0,
                       help="cut-off of the zero-phase low-pass filter on q and torque (Hz, default 5)")
    ident.add_argument("--armature", type=float, nargs="+", default=None,
                       help="the drives' reflected rotor inertia during the run, kg m^2 (one value, or one per joint)")
    ident.add_argument("--plot", default=None, help="PNG of the measured and predicted torques, before and after")
    ident.set_defaults(func=_cmd_identify)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; a mistake ends in one line on stderr and a non-zero exit, never a traceback
    (``RTCTL_TRACEBACK=1`` shows the traceback of an unexpected error).

    SIGINT, SIGTERM and SIGHUP stop every command in order (:mod:`rtctl.rt.signals`): a run ends at a cycle
    boundary with the safe command and each driver's deactivate, and prints its report. A command a signal
    stopped exits with 128 + the signal's number, except a run that ended tripped (3), e-stopped (4) or without
    its telemetry (5)."""
    args = build_parser().parse_args(argv)
    prog = f"rtctl {args.command}"
    with StopSignals(prog) as stop, warnings.catch_warnings():
        warnings.showwarning = _one_line_warning(prog)
        status = _dispatch(args, prog, stop)
        if stop.signum is not None:
            if status not in (EXIT_TRIPPED, EXIT_OPERATOR_STOP, EXIT_TELEMETRY_LOST):
                status = exit_status(stop.signum)
            print(f"{prog}: stopped by {signal_name(stop.signum)} (exit status {status})", file=sys.stderr,
                  flush=True)
        return status


def _one_line_warning(prog: str):
    """A warning (an inconsistent inertia in the robot file, a mimic joint) as ``prog: warning: message``,
    without Python's file, line and source line of where it was raised."""
    def show(message, category, filename, lineno, file=None, line=None):
        print(f"{prog}: warning: {message}", file=file or sys.stderr, flush=True)
    return show


def _dispatch(args, prog: str, stop: StopSignals) -> int:
    try:
        with stop.raising(), CompileProgress():
            return args.func(args)
    except BrokenPipeError:  # e.g. `rtctl info humanoid | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt as exc:
        if not isinstance(exc, StopSignal):    # a StopSignal's line is main's
            print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001  (one line for the operator; the traceback on request)
        if os.environ.get("RTCTL_TRACEBACK"):
            raise
        print(f"{prog}: error: {_explain(exc)}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, (ValueError, FileNotFoundError)) else 1   # a ModelError too


def _explain(exc: BaseException) -> str:
    """One line for an exception: the expected kinds by their message, others with their type."""
    if getattr(exc, "errno", None) == errno.EADDRINUSE:       # OSError, or ZeroMQ's ZMQError
        return f"address already in use ({exc}): another program (another rtctl?) is serving there; " \
               f"stop it or choose another port/endpoint"
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, (ValueError, FileNotFoundError, PermissionError, IsADirectoryError,   # ModelError too
                        NotADirectoryError)):     # a path given where a file is read or written: the message says
        return text
    return f"{type(exc).__name__}: {text} (RTCTL_TRACEBACK=1 shows where)"


if __name__ == "__main__":
    sys.exit(main())
