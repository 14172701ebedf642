"""The dashboard marks data older than half a second as stale instead of showing the last state as live.

* The bridge: a loop publishes from its publisher process; once that process is killed (kill -9) no
  samples come, and the frames, which keep coming, say how old the newest samples are and, beyond
  ``STALE_AFTER_S``, that they are stale.
* The page (its script run by node with a stand-in DOM and clock): the safety badge shows the state as
  received while samples are fresh, and "STALE: no data for ... s (last: ...)" once they are older than
  0.5 s, whether a frame says so or no frame comes at all (the bridge stopped).
"""
import asyncio
import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from websockets.asyncio.client import connect

from rtctl.operator.dashboard import STALE_AFTER_S, STATIC_DIR, Dashboard
from telemetry_helpers import make_loop

SINUSOID = {"type": "sinusoid", "center": [0.0] * 7, "amplitude": [0.2] * 7, "frequency": [1.0] * 7}
TEL = {"enabled": True, "endpoint": "tcp://127.0.0.1:0", "publisher": "process", "meta_period": 0.2}


async def next_frame(ws, timeout=5.0) -> dict:
    while True:
        message = json.loads(await asyncio.wait_for(ws.recv(), timeout))
        if message["type"] == "frame":
            return message


@pytest.mark.slow
def test_frames_say_the_data_is_stale_once_the_publisher_process_is_killed():
    loop = make_loop(loop={"pace": True, "rate_hz": 500.0}, trajectory=SINUSOID, telemetry=TEL)
    dash = Dashboard(loop.telemetry.endpoint, None, port=0)
    runner = threading.Thread(target=lambda: loop.run(duration=30.0), daemon=True)

    async def watch():
        async with connect(f"ws://127.0.0.1:{dash.port}/ws", origin=f"http://127.0.0.1:{dash.port}") as ws:
            fresh = [await next_frame(ws) for _ in range(10)]
            loop.telemetry._relay.kill()
            killed = time.monotonic()
            while not (frame := await next_frame(ws))["stale"]:
                pass
            return fresh, frame, time.monotonic() - killed

    try:
        dash.start()
        runner.start()
        fresh, stale, waited = asyncio.run(asyncio.wait_for(watch(), 30.0))
    finally:
        loop.request_stop()
        runner.join(10)
        dash.stop()
        loop.telemetry.close()
    assert all(not f["stale"] and f["age"] < STALE_AFTER_S for f in fresh), [f["age"] for f in fresh]
    assert stale["age"] > STALE_AFTER_S and stale["tripped"] == 0 and stale["t"] == []
    assert waited < stale["age"] + 0.5     # the frame came as the data turned stale, not whenever
    assert loop.telemetry.lost.startswith("the publisher process") and "killed by signal 9" in loop.telemetry.lost


NODE = shutil.which("node")


def page(steps: list[dict]) -> list[dict]:
    harness = Path(__file__).with_name("dashboard_page.js")
    proc = subprocess.run([NODE, str(harness), str(STATIC_DIR), json.dumps(steps)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_page_greys_the_safety_state_out_when_no_fresh_data_comes_for_half_a_second():
    shown = page([{"frame": {"age": 0.02}},                          # live
                  {"wait_ms": 300},                                   # 0.32 s old, no frame meanwhile: still live
                  {"wait_ms": 300},                                   # 0.62 s: stale (the bridge stopped sending)
                  {"frame": {"age": 0.01}},                           # fresh again
                  {"frame": {"age": 0.8, "stale": True, "tripped": 1}}])   # the bridge: samples 0.8 s old
    assert shown == [{"text": "ARMED", "cls": "armed", "stale": False},
                     {"text": "ARMED", "cls": "armed", "stale": False},
                     {"text": "STALE: no data for 0.6 s (last: ARMED)", "cls": "stale", "stale": True},
                     {"text": "ARMED", "cls": "armed", "stale": False},
                     {"text": "STALE: no data for 0.8 s (last: SAFE STATE: TRIPPED)", "cls": "stale",
                      "stale": True}]
