"""Request checks shared by the browser-reachable servers (the dashboard, the Foxglove server): the ``Host``
header against DNS rebinding and a websocket upgrade's ``Origin`` against pages of other sites."""
from __future__ import annotations

from ..options import show
from .endpoints import LOOPBACK_HOSTS

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def url_host(host: str) -> str:
    """``host`` as written in a URL or a Host header (IPv6 in brackets), lower case."""
    bare = host.strip("[]").lower()
    return f"[{bare}]" if ":" in bare else bare


def allowed_hosts(host: str, port: int) -> frozenset:
    """The ``Host`` header values a server bound to ``host``:``port`` answers: ``HOST:PORT``, and for a
    loopback bind any of ``127.0.0.1``, ``localhost``, ``[::1]`` with the port (port 80: also bare)."""
    names = LOOPBACK_NAMES if host in LOOPBACK_HOSTS else (url_host(host),)
    hosts = {f"{name}:{port}" for name in names}
    if port == 80:
        hosts |= set(names)
    return frozenset(hosts)


def host_refusal(request, hosts: frozenset, own: str, what: str) -> str | None:
    """Why ``request``'s ``Host`` header is refused (not exactly one, or not in ``hosts``), or None.

    ``own``: the server's ``HOST:PORT``; ``what``: the server named in the message ("this dashboard").
    ``request.headers``: websockets' headers or ``http.server``'s (whose ``get_all`` gives None for none).
    """
    found = request.headers.get_all("Host") or []
    if len(found) != 1:
        return f"refused: expected one Host header, got {len(found)}"
    if found[0].strip().lower() not in hosts:
        return f"refused: Host {show(found[0])} is not {what}'s address {own} (DNS-rebinding defence)"
    return None


def origin_refusal(request, origins: frozenset, expected: str, required: bool = True) -> str | None:
    """Why a websocket upgrade's ``Origin`` header is refused, or None.

    Browsers send one on every websocket upgrade; it must be in ``origins`` (lower case, no trailing
    slash). ``required=False`` also lets through a request with none (a non-browser client: no page of
    another site can make a browser omit it). ``expected`` ends the refusal message ("this dashboard's
    own origin http://...").
    """
    found = request.headers.get_all("Origin") or []
    if not found and not required:
        return None
    if len(found) != 1:
        return f"refused: a websocket upgrade needs one Origin header, got {len(found)}"
    if found[0].strip().lower() not in origins:
        return f"refused: websocket Origin {show(found[0])} is not {expected}"
    return None
