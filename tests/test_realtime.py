"""The loop thread's scheduling: a short fair-scheduler slice while it runs (so that it preempts readers
and the publisher when woken), the kernel's own slice back afterwards, and the config key's bounds."""
import threading

import pytest

import rtctl
from rtctl.config import ConfigError, build, load_config, validate
from rtctl.rt.realtime import TIME_SLICE, set_time_slice, time_slice


def demo_config():
    from pathlib import Path
    return load_config(Path(rtctl.__file__).parent / "data" / "configs" / "demo.toml")


def custom_slices() -> bool:
    """Whether this kernel takes a custom slice (Linux 6.12 and later); probed in a throwaway thread."""
    result = []
    probe = threading.Thread(target=lambda: result.append(set_time_slice(2 * TIME_SLICE)))
    probe.start()
    probe.join()
    return result == [""]


@pytest.mark.skipif(not custom_slices(), reason="this kernel keeps its own fair-scheduler slice")
def test_the_loop_thread_runs_with_the_short_slice_and_gets_the_kernel_default_back():
    default = time_slice()
    assert default > 5 * TIME_SLICE                       # the kernel's default (0.7 ms x (1 + log2 ncpus))
    loop = build(demo_config())
    seen = []
    loop.hooks.append(lambda *_args: seen.append(time_slice()) if len(seen) < 3 else None)
    report = loop.run(cycles=20)
    assert report.cycles == 20 and "time slice 100 us" in report.realtime
    assert seen == [pytest.approx(TIME_SLICE, abs=1e-9)] * 3
    assert time_slice() == pytest.approx(default, abs=1e-9)


@pytest.mark.skipif(not custom_slices(), reason="this kernel keeps its own fair-scheduler slice")
def test_the_slice_comes_back_when_the_run_is_interrupted_before_its_first_cycle(monkeypatch):
    """Ctrl-C while the loop prepares the process (the full collection before the run): the kernel's slice and
    the collector are given back, as after a run."""
    import gc

    default = time_slice()
    loop = build(demo_config())

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(gc, "freeze", interrupted)
    with pytest.raises(KeyboardInterrupt):
        loop.run(cycles=20)
    assert time_slice() == pytest.approx(default, abs=1e-9)
    assert gc.isenabled()


def test_a_kernel_without_custom_slices_is_reported_only_when_the_slice_was_asked_for(monkeypatch):
    import rtctl.rt.realtime as realtime

    monkeypatch.setattr(realtime, "set_time_slice", lambda seconds: "kernel 6.8 keeps its own slice" if seconds
                        else "")
    assert realtime.apply_realtime(realtime.RealtimeSettings()).message() == "real-time settings none requested"
    asked = realtime.apply_realtime(realtime.RealtimeSettings(time_slice_asked=True))
    assert asked.not_applied == ["time slice 100 us (kernel 6.8 keeps its own slice)"]
    cfg = demo_config()
    assert build(cfg).realtime.time_slice == TIME_SLICE and not build(cfg).realtime.time_slice_asked
    cfg["loop"]["time_slice_us"] = 100.0
    assert build(cfg).realtime.time_slice_asked


def test_time_slice_config_key():
    cfg = demo_config()
    cfg["loop"]["time_slice_us"] = 0.0
    assert build(cfg).realtime.time_slice is None            # 0: the kernel's default slice, nothing requested
    cfg["loop"]["time_slice_us"] = 500.0
    assert build(cfg).realtime.time_slice == pytest.approx(5e-4)
    cfg["loop"]["time_slice_us"] = 50.0
    with pytest.raises(ConfigError, match=r"\[loop\] time_slice_us = 50: the kernel's shortest slice is 100 us"):
        build(cfg)
    cfg["loop"]["time_slice_us"] = -1.0
    with pytest.raises(ConfigError, match="time_slice_us"):
        validate({"robot": {"model": "arm7"}, "loop": {"time_slice_us": -1.0}})


def test_an_offline_run_applies_no_real_time_setting_and_says_so():
    """Cycles back to back need no scheduler setting; the report used to say 'real-time settings applied'."""
    cfg = demo_config()
    cfg["loop"]["pace"] = False
    loop = build(cfg)
    before, seen = time_slice(), []
    loop.hooks.append(lambda *_args: seen.append(time_slice()) if len(seen) < 3 else None)
    report = loop.run(cycles=20)
    assert report.realtime == ("real-time settings not applied: an offline run (pace off) runs its cycles back to "
                               "back")
    assert "real-time settings applied" not in report.format() and "time slice" not in report.format()
    assert seen == [before] * 3
