"""``rtctl-hil``: the hardware-in-the-loop tools from the installed package.

Subcommands::

    rtctl-hil can-bus [--port PORT] [--channel NAME]      # loopback CAN bus server (python-can-remote)
    rtctl-hil can-emulator --protocol mit|cia402 ...       # emulated CAN motors / drives (see --help)
    rtctl-hil dynamixel-emulator ...                       # emulated Dynamixel chain on a pty (see --help)
    rtctl-hil mip-imu ...                                  # emulated MicroStrain MIP IMU on a pty (see --help)
    rtctl-hil netft-sensor ...                             # emulated ATI Net F/T over RDT on loopback (see --help)
    rtctl-hil ethercat-slaves --interface IFACE ...        # emulated EtherCAT slaves on a raw socket (see --help)

``can-bus`` serves python-can-remote's websocket server on 127.0.0.1 only (port 0, the default, takes a
free port), to programs on this machine: no files, no web page (see :func:`_server_classes`); every client
connection gets its own python-can ``virtual`` bus on one channel, so frames
cross between the processes connected to it. It prints one line, the URL clients open with
``can.Bus(interface="remote", channel=URL)``, and serves until Ctrl-C, SIGTERM or SIGHUP; then it closes every
client connection, shuts their buses down and exits with status 0. The same runs as
``python -m rtctl.hil.cli``.
"""
from __future__ import annotations

import argparse
import contextlib
import logging
import socket
import sys
import threading

from rtctl.options import Parser
from rtctl.rt.signals import on_stop_signals

LOOPBACK = "127.0.0.1"
ONLY_THE_BUS = "rtctl-hil can-bus serves only its CAN bus websocket (GET / with Upgrade: websocket)"
log = logging.getLogger(__name__)


def _server_classes():
    """python-can-remote's server serving its websocket and nothing else, to programs on this machine only, with
    each client connection's end made robust.

    python-can-remote 0.3 also serves a web folder, joining the raw request path to it (``/../..`` reached any
    file the server's user can read) and takes websocket upgrades from any page. Here a request is answered only
    when its ``Host`` is this server's loopback address (the dashboard's check: no DNS-rebound page) and it
    carries no ``Origin`` (a browser sends one for every page, so no web page reaches the bus); then only a
    websocket upgrade on ``/`` is served, anything else is ``404``. A client that dies (SIGKILL, a broken pipe)
    ends its connection quietly and its bus is shut down, where python-can-remote lets the sending thread die
    with a traceback and leaves the bus open."""
    from can_remote import server as remote
    from can_remote.websocket import WebSocket, get_accept_key

    from rtctl.operator.dashboard import allowed_hosts, host_refusal, origin_refusal

    class Protocol(remote.RemoteServerProtocol):
        def run(self):
            self._send_thread.start()
            try:
                self._receive_from_client()
            except Exception as exc:  # noqa: BLE001  (the client went away mid-frame)
                log.info("client connection ended: %s: %s", type(exc).__name__, exc)
            finally:
                self.running = False
                if self._send_thread.is_alive():
                    self._send_thread.join(3)
                with contextlib.suppress(Exception):
                    self._ws.socket.close()

        def _send_to_client(self):
            try:
                while self.running:
                    msg = self.bus.recv(0.1)
                    if msg is not None:
                        self.send_msg(msg)
            except Exception as exc:  # noqa: BLE001  (a broken pipe: the client died)
                log.info("client connection lost: %s: %s", type(exc).__name__, exc)
            finally:
                self.running = False
                with contextlib.suppress(OSError):
                    self._ws.socket.shutdown(socket.SHUT_RDWR)   # ends the receiving side too
                self.bus.shutdown()

    class Handler(remote.ClientRequestHandler):
        def do_GET(self):   # python-can-remote's also serves its web folder, joined to the raw request path
            refusal = self.server.refusal(self)
            if refusal is not None:
                self.refuse(403, refusal)
            elif self.path != "/" or self.headers.get("Upgrade", "").lower() != "websocket":
                self.refuse(404, ONLY_THE_BUS)
            else:
                self.start_websocket()

        def refuse(self, status: int, text: str) -> None:
            body = (text + "\n").encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True

        def start_websocket(self):    # python-can-remote's, with the Protocol above
            self.send_response(101)
            self.send_header("Upgrade", "WebSocket")
            self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", get_accept_key(self.headers["Sec-WebSocket-Key"]))
            offered = [p.strip() for p in self.headers.get("Sec-WebSocket-Protocol", "can.json.v1").split(",")]
            name = "can.binary+json.v1" if "can.binary+json.v1" in offered else "can.json.v1"
            self.send_header("Sec-WebSocket-Protocol", name)
            self.end_headers()
            protocol = Protocol(self.server.config, WebSocket(None, name, sock=self.request))
            self.server.clients.append(protocol)
            try:
                protocol.run()
            finally:
                self.server.clients.remove(protocol)

    class Server(remote.RemoteServer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.RequestHandlerClass = Handler
            self.hosts = allowed_hosts(LOOPBACK, self.server_address[1])

        def refusal(self, request) -> str | None:
            """Why ``request`` is refused: a Host that is not this server's address (a DNS-rebound page), or
            any Origin (browsers send one for every page; no web page is a client of this bus)."""
            return (host_refusal(request, self.hosts, f"{LOOPBACK}:{self.server_address[1]}", "this CAN bus")
                    or origin_refusal(request, frozenset(), "allowed: this CAN bus serves programs on this "
                                      "machine, not web pages", required=False))

        def handle_error(self, request, client_address):   # one line, no traceback
            exc = sys.exc_info()[1]
            log.info("client %s: %s: %s", client_address, type(exc).__name__, exc)

    return Server


class CanBusServer:
    """python-can-remote's ``RemoteServer`` on 127.0.0.1 over a python-can ``virtual`` channel, served from a
    thread; :meth:`close` ends every client connection and shuts its bus down (no "not properly shut down")."""

    def __init__(self, port: int = 0, channel: str = "rtctl-hil"):
        self.server = _server_classes()(LOOPBACK, int(port), interface="virtual", channel=channel)
        self.port = self.server.server_address[1]
        self.url = f"ws://{LOOPBACK}:{self.port}/"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="can-bus-server", daemon=True)
        self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        server = self.server
        server.shutdown()                       # no new connections; serve_forever returns
        self._thread.join(timeout)
        clients = list(server.clients)
        for proto in clients:
            proto.running = False
            with contextlib.suppress(Exception):
                proto._ws.close(1001, "server shutting down")
            with contextlib.suppress(OSError):
                proto._ws.socket.shutdown(socket.SHUT_RDWR)   # unblocks the connection's reading thread
        for proto in clients:
            thread = getattr(proto, "_send_thread", None)
            if thread is not None and thread.is_alive():
                thread.join(timeout)             # it shuts the connection's bus down on its way out
            with contextlib.suppress(Exception):
                proto.bus.shutdown()             # a no-op if it already did
        server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _can_bus(args) -> int:
    stop = threading.Event()
    on_stop_signals(lambda *_: stop.set())
    try:
        server = CanBusServer(args.port, args.channel)
    except OSError as exc:
        from rtctl.telemetry.endpoints import tcp_in_use
        reason = tcp_in_use(exc, LOOPBACK, args.port)
        print(f"rtctl-hil can-bus: cannot listen on {LOOPBACK}:{args.port}: {reason.strerror or reason}",
              file=sys.stderr)
        return 1
    print(server.url, flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.close()
    return 0


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0..65535 (0: a free one), got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="rtctl-hil", description="Hardware-in-the-loop tools: a loopback CAN bus server and the "
                                               "emulated CAN and Dynamixel actuators, MIP IMU and ATI Net F/T sensor.")
    sub = p.add_subparsers(dest="command", required=True,
                           metavar="{can-bus,can-emulator,dynamixel-emulator,mip-imu,netft-sensor,ethercat-slaves}",
                           parser_class=Parser)
    bus = sub.add_parser("can-bus", help="loopback CAN bus server (python-can-remote on 127.0.0.1)",
                         description="Serve a CAN bus to processes on this machine: python-can-remote's websocket "
                                     "server on 127.0.0.1 over one python-can virtual channel. Prints the URL "
                                     "for interface='remote', serves until Ctrl-C, SIGTERM or SIGHUP.")
    bus.add_argument("--port", type=_port, default=0, help="TCP port on 127.0.0.1 (default 0: a free one)")
    bus.add_argument("--channel", default="rtctl-hil", help="name of the virtual channel inside the server")
    sub.add_parser("can-emulator", help="emulated MIT motors / CiA 402 drives on a CAN bus (args: see --help)",
                   add_help=False)
    sub.add_parser("dynamixel-emulator", help="emulated Dynamixel servo chain on a pty (args: see --help)",
                   add_help=False)
    sub.add_parser("mip-imu", help="emulated MicroStrain MIP IMU (3DM-GX5-25 class) on a pty (args: see --help)",
                   add_help=False)
    sub.add_parser("netft-sensor", help="emulated ATI Net F/T force-torque sensor over RDT (args: see --help)",
                   add_help=False)
    sub.add_parser("ethercat-slaves", help="emulated EtherCAT slaves (CiA 402 drives) on a network interface "
                   "(args: see --help)", add_help=False)
    return p


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # The emulators parse their own arguments (everything after the subcommand, --help included).
    if argv and argv[0] == "can-emulator":
        from .can_emulator import main as can_main
        return can_main(argv[1:], prog="rtctl-hil can-emulator") or 0
    if argv and argv[0] == "dynamixel-emulator":
        from .dynamixel_emulator import main as dxl_main
        return dxl_main(argv[1:]) or 0
    if argv and argv[0] == "mip-imu":
        from .mip_imu import main as mip_main
        return mip_main(argv[1:]) or 0
    if argv and argv[0] == "netft-sensor":
        from .netft_sensor import main as netft_main
        return netft_main(argv[1:]) or 0
    if argv and argv[0] == "ethercat-slaves":
        from .ethercat.emulator import main as ethercat_main
        return ethercat_main(argv[1:], prog="rtctl-hil ethercat-slaves") or 0
    args = build_parser().parse_args(argv)
    return _can_bus(args)


if __name__ == "__main__":
    sys.exit(main())
