"""``rtctl replay``: a recording republished as the live telemetry stream (schema v1), at its recorded pace or
faster, its robot description sent once after the metadata; a stop signal (:mod:`rtctl.rt.signals`) ends it
between two batches, and it says what it sent."""
from __future__ import annotations

import sys
import time

import numpy as np
import zmq

from ..rt.signals import stop_requests
from .schema import TOPIC_DESCRIPTION, TOPIC_EVENT, TOPIC_META, TOPIC_SAMPLES, envelope, pack
from .subscriptions import SubscriptionGuard, publishing_socket
from .tools import read_recording, require_fields

STOP_POLL = 0.1                  # s: the longest a replay sleeps before it looks for a stop signal


def _sleep_until(due: float, stopped: list) -> bool:
    """Sleep until ``due`` (monotonic s), looking for a stop every :data:`STOP_POLL` s; False if one came."""
    while not stopped and (left := due - time.monotonic()) > 0:
        time.sleep(min(left, STOP_POLL))
    return not stopped


def replay(path: str, endpoint: str, speed: float = 1.0, batch_period: float = 0.01, progress: bool = True,
           connect_wait: float = 0.5, ctx=None, ready=None, out=None) -> int:
    """Republish a recording on a PUB socket as the live schema-v1 stream (``speed`` 0: as fast as possible).

    ``ready``: an optional callback given the bound endpoint once bound. Returns samples sent (fewer when a
    stop signal ended the replay).
    """
    from tqdm import tqdm

    from .endpoints import bind, check_endpoint, close

    rec = read_recording(path, progress=False)
    s = rec["samples"]
    require_fields(path, s, ("index", "t", "cycle"), "replay")
    n = len(s.get("t", ()))
    meta = rec["meta"] or envelope(joints=[], fields={}, note="recording without metadata")
    meta.pop("backlog", None)    # a replay answers no backlog subscription: a recorder of it must not wait for one
    ctx = ctx or zmq.Context.instance()
    pub = publishing_socket(ctx, 100_000, linger=1000)
    bound = bind(pub, check_endpoint(endpoint))
    subscriptions = SubscriptionGuard(pub)
    names = [k for k in s if k != "index"]
    bar = None
    t_rec = s["t"] if n else np.zeros(0)
    i, seq = 0, 0
    events = sorted(rec["events"], key=lambda e: e.get("cycle", -1))
    ev_i = 0
    stopped: list = []
    try:
        with stop_requests(stopped.append):     # a stop signal ends the replay between two batches
            if ready is not None:
                ready(bound)
            _sleep_until(time.monotonic() + connect_wait, stopped)  # let subscribers connect (PUB/SUB slow joiner)
            pub.send_multipart([TOPIC_META, pack(meta)])
            described = rec["description"]
            if isinstance(described, dict) and isinstance(described.get("data"), str):
                pub.send_multipart([TOPIC_DESCRIPTION, pack(envelope(robot=meta.get("robot"), urdf=described["data"],
                                                                     sensor_frames=described.get("sensor_frames")))])
            bar = tqdm(total=n, unit="sample", desc="replaying", disable=not progress, file=out or sys.stderr)
            wall0 = time.monotonic()
            while i < n and not stopped:
                j = i + 1
                while j < n and t_rec[j] - t_rec[i] < batch_period and j - i < 250:
                    j += 1
                if speed > 0 and not _sleep_until(wall0 + (t_rec[i] - t_rec[0]) / speed, stopped):
                    break
                fields = {name: s[name][i:j].tolist() for name in names}
                sent = time.time()
                # Stamped as handed off now (as a live loop does), keeping the recorded spacing at this speed.
                fields["stamp"] = (sent - (t_rec[j - 1] - t_rec[i:j]) / speed).tolist() if speed > 0 \
                    else [sent] * (j - i)
                msg = envelope(seq=seq, first=int(s["index"][i]), count=j - i, dropped=0, sent=sent,
                               fields=fields, replay=True)
                pub.send_multipart([TOPIC_SAMPLES, pack(msg)])
                subscriptions.read()
                while ev_i < len(events) and events[ev_i].get("cycle", -1) <= s["cycle"][j - 1]:
                    pub.send_multipart([TOPIC_EVENT, pack(events[ev_i])])
                    ev_i += 1
                seq += 1
                bar.update(j - i)
                i = j
    except KeyboardInterrupt:       # Ctrl-C outside rtctl's command line: what was sent is the answer
        pass
    finally:
        if bar is not None:
            bar.close()
        close(pub)
    return i
