"""Config -> telemetry and control channel of a built loop (used by :func:`rtctl.config.build`): the control
channel is served by an operator process (:mod:`.process`)."""
from __future__ import annotations

from ..telemetry.publisher import PUBLISHER_NICE, SWITCH_INTERVAL, Telemetry
from ..telemetry.schema import SCHEMA_VERSION
from .auth import server_token
from .process import OperatorProcess


def wire(loop, tel: dict, ctl: dict):
    """Attach and start what the ``[telemetry]`` / ``[control]`` sections enable; returns (telemetry, control).

    Sets ``loop.control`` (None when off) alongside ``loop.telemetry``; close both with :func:`close`.
    """
    telemetry = control = None
    try:
        if tel.get("enabled"):
            sinks = []
            if tel.get("foxglove"):
                from ..telemetry.foxglove import (DEFAULT_ALLOWED_ORIGINS, DEFAULT_BACKLOG, DEFAULT_MAX_CLIENTS, DEFAULT_PORT,
                                       DEFAULT_SCENE_RATE,
                                       FoxgloveSink)
                sinks.append(FoxgloveSink(host=tel.get("foxglove_host", "127.0.0.1"),
                                          port=tel.get("foxglove_port", DEFAULT_PORT),
                                          decimation=tel.get("foxglove_decimation", 1),
                                          backlog=tel.get("foxglove_backlog", DEFAULT_BACKLOG),
                                          allowed_origins=tel.get("foxglove_allowed_origins",
                                                                  DEFAULT_ALLOWED_ORIGINS),
                                          max_clients=tel.get("foxglove_max_clients", DEFAULT_MAX_CLIENTS),
                                          scene_rate=tel.get("foxglove_scene_rate", DEFAULT_SCENE_RATE),
                                          allow_remote=tel["allow_remote"]))
            switch = tel.get("switch_interval", SWITCH_INTERVAL)
            telemetry = Telemetry(endpoint=tel["endpoint"], capacity=tel["capacity"],
                                  plotjuggler_endpoint=tel["plotjuggler_endpoint"] if tel["plotjuggler"] else None,
                                  plotjuggler_decimation=tel["plotjuggler_decimation"],
                                  plotjuggler_format=tel["plotjuggler_format"],
                                  batch_period=tel["batch_period"], meta_period=tel["meta_period"],
                                  sndhwm=tel["sndhwm"], allow_remote=tel["allow_remote"], sinks=sinks,
                                  switch_interval=switch if switch else None,
                                  process=tel.get("publisher", "process") == "process",
                                  publisher_nice=tel.get("publisher_nice", PUBLISHER_NICE))
            telemetry.attach(loop).start()
        if ctl.get("enabled"):
            token, token_source = server_token(ctl["token_file"] or None)
            control = OperatorProcess(loop, endpoint=ctl["endpoint"], token=token,
                                    curve_secret_key=ctl["curve_secret_key"] or None,
                                    curve_clients=ctl["curve_clients"] or None,
                                    kp_max=ctl["kp_max"], kd_max=ctl["kd_max"], frequency_max=ctl["frequency_max"],
                                    duration_max=ctl["duration_max"], allow_remote=ctl["allow_remote"],
                                    telemetry=telemetry, token_source=token_source)
            control.start()
    except (RuntimeError, ValueError) as exc:
        for part in (telemetry, control):
            if part is not None:
                part.close()
        raise ValueError(str(exc)) from None
    loop.control = control
    return telemetry, control


def close(loop) -> None:
    """Stop the control channel and flush/stop the publisher of a loop built with them (no-op otherwise)."""
    for part in (loop.control, loop.telemetry):
        if part is not None:
            part.close()


def lost(loop) -> str:
    """How the loop's telemetry publisher process died during the run (``""``: it did not, or there is none)."""
    return loop.telemetry.lost if isinstance(loop.telemetry, Telemetry) else ""


def describe(loop) -> None:
    """Print where a loop's telemetry and control channel listen (nothing when off)."""
    tel, ctl = loop.telemetry, loop.control
    if tel is not None:
        extra = f", PlotJuggler JSON on {tel.plotjuggler_endpoint}" if tel.plotjuggler_endpoint else ""
        for sink in tel.sinks:
            if sink.url:
                extra += f", Foxglove on {sink.url}"
        print(f"rtctl: telemetry on {tel.endpoint} (schema v{SCHEMA_VERSION}){extra}", flush=True)
    if ctl is not None:
        print(f"rtctl: control channel on {ctl.endpoint} (status and estop open; other commands need the token "
              f"from {ctl.token_source})", flush=True)
