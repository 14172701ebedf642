"""The control token goes only to a proven holder, and a proof cannot be relayed: each attack as found, by
another user of the control PC (uid 65534, a forked child) where that is who mounts it.

* The dashboard's Re-arm sent ``{"cmd": "rearm", "token": ...}`` to whatever listened on the control port:
  after the run exited, a process bound to that port got the token and the page showed "re-armed". Now the
  squatter gets a ``hello`` with a random nonce, the page says the endpoint did not prove it holds the token.
* ``status`` answered HMAC(token, challenge) for any challenge and all runs of a user share one token: a
  squatter on a stopped run's port relayed the client's challenge to a live run, passed its proof back, got
  the token and changed the live run's gains. Now the live run's proof names its own endpoint and run, which
  the client refuses, the client proves nothing, ``status`` takes no challenge, and nothing the squatter saw
  commands the live run.
* ``rtctl control rearm token=SECRET`` took the token from the command line (``ps`` shows it) and sent it
  unverified. Now it is refused before anything is sent.
* The token never crosses the wire, and a proof is good for one session with one server: another server, a
  second use, another command or an expired session refuse it.
"""
import json
import os
import threading
import time

import msgpack
import pytest
import zmq

from other_user import another_user
from rtctl.cli import main
from rtctl.operator import ControlServer, request
from rtctl.operator.dashboard import Dashboard
from rtctl.operator.handshake import ClientHandshake, ServerNotTrusted, Sessions, server_identity
from rtctl.operator.requests import Refused
from telemetry_helpers import make_loop, run_in_background

TOKEN = "shared-by-all-runs-of-this-user-0123"
REARMED = {"ok": True, "applied_cycle": 1, "detail": "re-armed"}
ANOTHER_UID = 65534 if os.getuid() == 0 else os.getuid()


def _squat(held, port, relay_to=None, rewrite_server=False):
    """Bind the control port of a run that exited. Answer every request as a control channel that re-armed, or
    relay each one to the live run at ``relay_to`` (``rewrite_server``: claiming to be the port it squats).
    Its report: every request it received, then what the live run answered to its own attempts with all it
    saw (the client's messages, the live run's replies)."""
    ctx = zmq.Context()
    squatter = ctx.socket(zmq.REP)
    for attempt in range(200):        # the run's socket closes in ZeroMQ's I/O thread, a moment after close()
        try:
            squatter.bind(f"tcp://127.0.0.1:{port}")
            break
        except zmq.ZMQError:
            if attempt == 199:
                raise
            time.sleep(0.025)
    seen, replies = [], []
    held += [ctx, squatter]

    def serve():
        live = None
        if relay_to:
            live = ctx.socket(zmq.REQ)
            live.connect(relay_to)
        while squatter.poll(500 if seen else 10_000):   # until the client has gone
            raw = squatter.recv()
            seen.append(raw.hex())
            if live is None:
                squatter.send(msgpack.packb(REARMED))
                continue
            live.send(raw)
            reply = msgpack.unpackb(live.recv(), raw=False) if live.poll(3000) else {}
            replies.append(reply)
            if rewrite_server:
                reply["server"] = f"tcp://127.0.0.1:{port}"
            squatter.send(msgpack.packb(reply))
        if live is not None:
            live.close(linger=0)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()

    def report():
        thread.join(10)
        return {"seen": seen, "attempts": _use_what_was_seen(ctx, relay_to, seen, replies) if relay_to else []}

    return {"report": report}


def _use_what_was_seen(ctx, live_endpoint, seen, replies):
    """The squatter's own requests to the live run, with every session, proof and token it has seen."""
    sent = [msgpack.unpackb(bytes.fromhex(raw), raw=False) for raw in seen]
    proofs = [m.get("proof") for m in sent + replies if isinstance(m, dict) and "proof" in m]
    sessions = [r.get("nonce") for r in replies if isinstance(r, dict) and "nonce" in r]
    attempts = [{"cmd": "set_gains", "kp": 1.0, "session": s, "proof": p} for s in sessions for p in proofs]
    attempts += [{"cmd": "status", "challenge": "0123456789abcdef"}, {"cmd": "set_gains", "kp": 1.0}]
    answers = []
    sock = ctx.socket(zmq.REQ)
    sock.connect(live_endpoint)
    for attempt in attempts:
        sock.send(msgpack.packb(attempt))
        answers.append(msgpack.unpackb(sock.recv(), raw=False) if sock.poll(3000) else {"error": "no reply"})
    sock.close(linger=0)
    return answers


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _released(port, timeout=10.0):
    """Return once this process no longer listens on ``port``. ZeroMQ closes a socket's listener in its I/O
    thread, a moment after close(): a child forked before that inherits the listening descriptor and holds the
    port for as long as it lives (the squatter then failed to bind it in 2 of 7 runs)."""
    import socket
    deadline = time.monotonic() + timeout
    while True:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
        time.sleep(0.01)


def test_the_dashboard_s_rearm_gives_a_squatter_on_an_exited_run_s_port_neither_the_token_nor_a_rearm():
    import asyncio

    from websockets.asyncio.client import connect

    port = _free_port()
    run = ControlServer(make_loop(), endpoint=f"tcp://127.0.0.1:{port}", token=TOKEN).start()
    dash = Dashboard("tcp://127.0.0.1:1", f"tcp://127.0.0.1:{port}", port=0)
    dash.start()
    run.close()                                                    # the run exited; the dashboard stays open
    _released(port)

    async def press_rearm():
        async with connect(f"ws://127.0.0.1:{dash.port}/ws", origin=f"http://127.0.0.1:{dash.port}") as ws:
            await ws.send(json.dumps({"cmd": "rearm", "token": TOKEN}))
            while True:
                message = json.loads(await ws.recv())
                if message["type"] == "reply":
                    return message

    try:
        with another_user(_squat, port) as squatter:
            assert "error" not in squatter.result, squatter.result
            page = asyncio.run(asyncio.wait_for(press_rearm(), 20))
            seen = [msgpack.unpackb(bytes.fromhex(m), raw=False) for m in squatter.finish()["seen"]]
    finally:
        dash.stop()
    assert page["ok"] is False and "did not prove it holds the token" in page["error"], page
    assert [m["cmd"] for m in seen] == ["hello"] and set(seen[0]) == {"cmd", "nonce"}, seen
    assert squatter.result["uid"] == ANOTHER_UID


@pytest.mark.parametrize("rewrite_server", [False, True], ids=["verbatim", "claiming-the-squatted-port"])
@pytest.mark.slow
def test_a_squatter_relaying_to_a_live_run_gets_nothing_the_client_or_the_live_run_accepts(rewrite_server):
    loop = make_loop(loop={"pace": True, "rate_hz": 500.0})
    live = ControlServer(loop, endpoint="tcp://127.0.0.1:0", token=TOKEN).start()
    runner = run_in_background(loop, 30.0)
    stopped_port = _free_port()
    kp = loop.controller.kp.tolist()
    try:
        with another_user(_squat, stopped_port, live.endpoint, rewrite_server) as squatter:
            assert "error" not in squatter.result, squatter.result
            with pytest.raises(ServerNotTrusted, match="nothing was sent"):
                request(f"tcp://127.0.0.1:{stopped_port}", {"cmd": "set_gains", "kp": 300.0}, token=TOKEN)
            report = squatter.finish()
        assert loop.controller.kp.tolist() == kp and not loop.safety.tripped
        assert squatter.result["uid"] == ANOTHER_UID
    finally:
        loop.request_stop()
        runner.join(10)
        live.close()
    seen = [msgpack.unpackb(bytes.fromhex(m), raw=False) for m in report["seen"]]
    assert [m["cmd"] for m in seen] == ["hello"] and TOKEN not in json.dumps(seen), seen
    *relayed, challenge, bare = report["attempts"]
    assert relayed and all(r["ok"] is False and "set_gains:" in r["error"] for r in relayed), relayed
    assert challenge == {"ok": False, "error": "status: unknown field 'challenge'; allowed: []"}
    assert bare["ok"] is False and "set_gains: needs the token" in bare["error"], bare


def test_rtctl_control_refuses_a_token_on_its_command_line_and_sends_nothing(tmp_path, capsys):
    ctx = zmq.Context.instance()
    squatter = ctx.socket(zmq.REP)
    squatter.setsockopt(zmq.LINGER, 0)
    port = squatter.bind_to_random_port("tcp://127.0.0.1")
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    try:
        assert main(["control", "rearm", f"token={TOKEN}", "--endpoint", f"tcp://127.0.0.1:{port}"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "a token is never taken from the command line" in err, err
        assert not squatter.poll(300)                               # nothing was sent
        seen = []

        def answer():                  # as the control channel did: it re-armed
            if squatter.poll(5000):
                seen.append(squatter.recv())
                squatter.send(msgpack.packb(REARMED))

        thread = threading.Thread(target=answer)
        thread.start()
        assert main(["control", "rearm", "--endpoint", f"tcp://127.0.0.1:{port}", "--token-file",
                     str(token_file)]) == 1
        thread.join(5)
        assert "did not prove it holds the token" in capsys.readouterr().err
        assert [msgpack.unpackb(m, raw=False)["cmd"] for m in seen] == ["hello"]
    finally:
        squatter.close(linger=0)


def test_the_token_never_crosses_the_wire_and_status_takes_no_challenge():
    loop = make_loop(loop={"pace": True, "rate_hz": 500.0})
    server = ControlServer(loop, endpoint="tcp://127.0.0.1:0", token=TOKEN)
    received = []
    handle_bytes = server.handle_bytes
    server.handle_bytes = lambda raw, deferred=False: received.append(raw) or handle_bytes(raw, deferred)
    server.start()
    runner = run_in_background(loop, 30.0)
    try:
        reply = request(server.endpoint, {"cmd": "set_gains", "kp": 300.0}, token=TOKEN)
        assert reply["ok"], reply
        assert loop.controller.kp.tolist() == [300.0] * 7
        status = request(server.endpoint, {"cmd": "status", "challenge": "0123456789abcdef"})
        assert status["ok"] is False and "unknown field 'challenge'" in status["error"]
    finally:
        loop.request_stop()
        runner.join(10)
        server.close()
    assert [msgpack.unpackb(raw, raw=False)["cmd"] for raw in received] == ["hello", "set_gains", "status"]
    assert not any(TOKEN.encode() in raw for raw in received)


def test_a_proof_is_good_for_one_session_with_one_server_only():
    now = [0.0]
    first = Sessions(TOKEN, server_identity("tcp://localhost:5557"), "run-a", clock=lambda: now[0])
    second = Sessions(TOKEN, server_identity("tcp://127.0.0.1:5558"), "run-b", clock=lambda: now[0])
    third = Sessions(TOKEN, first.server, "run-c", clock=lambda: now[0])   # a later run on the first's port

    def proved(sessions, endpoint, cmd="rearm"):
        handshake = ClientHandshake(TOKEN, endpoint)
        return handshake.authenticate(sessions.hello(handshake.hello()), {"cmd": cmd})

    request_ = proved(first, "tcp://127.0.0.1:5557")
    for other in (second, third):
        opened = other.hello({"nonce": "0" * 32})
        with pytest.raises(Refused, match="rearm: wrong proof"):
            other.check("rearm", {**request_, "session": opened["nonce"]})
    first.check("rearm", request_)                                  # once
    with pytest.raises(Refused, match="session: unknown, used or expired"):
        first.check("rearm", request_)
    with pytest.raises(Refused, match="set_gains: wrong proof"):
        first.check("set_gains", proved(first, "tcp://127.0.0.1:5557", "rearm"))
    late = proved(first, "tcp://127.0.0.1:5557")
    now[0] += 10.5
    with pytest.raises(Refused, match="session: unknown, used or expired"):
        first.check("rearm", late)
    with pytest.raises(ServerNotTrusted, match=r"answered as 'tcp://127.0.0.1:5557', not as itself"):
        proved(first, "tcp://127.0.0.1:5558")
