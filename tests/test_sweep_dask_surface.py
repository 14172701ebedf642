"""A sweep's Dask cluster runs no one else's code (issue: the control PC is shared).

The attack: while the operator (root) runs ``rtctl sweep`` on the Dask backend, another user of the machine
(uid 65534) finds the cluster's listening ports, as ``/proc/net/tcp`` shows them to everyone, connects a Dask
client to the scheduler and has it run ``os.getuid`` in a sweep worker, and asks every port for an HTTP page.
"""
from __future__ import annotations

import os
import socket

import pytest

pytest.importorskip("dask.distributed")
pytest.importorskip("cryptography")

import psutil  # noqa: E402  (a dependency of distributed)
from distributed import Client, LocalCluster, Security  # noqa: E402

from other_user import as_other_user  # noqa: E402
from rtctl.sweep import create_backend  # noqa: E402


def listening_ports(pids) -> set:
    return {c.laddr.port for c in psutil.net_connections("inet") if c.status == "LISTEN" and c.pid in pids}


def cluster_ports(before: set) -> set:
    """The loopback ports this process and its children (the cluster's workers) listen on, beyond ``before``."""
    me = psutil.Process()
    return listening_ports({me.pid, *(p.pid for p in me.children(recursive=True))}) - before


def run_code_on(address: str, security=None):
    """As another user: a Dask client on ``address`` has ``os.getuid`` run; the uid it got, or the type of the
    error and whether it is a connection's (OSError: the server refused or closed it)."""
    try:
        with Client(address, timeout="3s", security=security) as client:
            return client.submit(os.getuid, pure=False).result(timeout=30)
    except Exception as exc:  # noqa: BLE001  (refused: what the attacker sees)
        return type(exc).__name__, isinstance(exc, OSError)


def attack(open_control: str, scheduler_port: int, own_credentials) -> dict:
    """As another user: first the open scheduler of ``open_control`` (what the sweep's was: the attacker's
    client works as this user), then the sweep's scheduler, plain and over TLS with credentials of its own
    (the cluster's are in its processes' memory only)."""
    return {"control": run_code_on(open_control),
            "tcp": run_code_on(f"tcp://127.0.0.1:{scheduler_port}"),
            "tls": run_code_on(f"tls://127.0.0.1:{scheduler_port}", own_credentials)}


def http_pages(ports) -> dict:
    """As another user: ``GET /`` on each port; the start of each answer (b"" when none came)."""
    answers = {}
    for port in ports:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                s.settimeout(3)
                answers[port] = s.recv(64)
        except OSError:
            answers[port] = b""
    return answers


@pytest.mark.slow
def test_another_user_cannot_run_code_in_the_sweeps_workers_nor_read_its_pages():
    before = listening_ports({os.getpid()})
    with LocalCluster(n_workers=1, processes=False, protocol="tcp://", host="127.0.0.1", dashboard_address=None,
                      silence_logs=40) as control:
        before |= cluster_ports(before)
        with create_backend("dask", workers=1) as backend:
            assert backend.client.submit(os.getuid, pure=False).result(timeout=60) == os.getuid()   # the sweep's
            scheduler = backend.client.scheduler.address
            port = int(scheduler.rsplit(":", 1)[1])
            ports = cluster_ports(before)
            got = as_other_user(attack, control.scheduler_address, port, Security.temporary())
            answers = as_other_user(http_pages, ports)
    assert got["control"] == os.getuid()       # an open scheduler runs the other user's code as the operator
    for scheme in ("tcp", "tls"):
        assert isinstance(got[scheme], tuple) and got[scheme][1], got          # refused at the connection
    assert not any(a.startswith(b"HTTP/") for a in answers.values()), answers   # no page on any port
    assert port in ports and len(ports) >= 3 and 8787 not in ports, ports      # scheduler, nanny, worker
    assert scheduler.startswith("tls://127.0.0.1:")
