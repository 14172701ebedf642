"""Requests of the control channel as they arrive: the command table, decoding, the structure check, replies.

Every request passes :func:`check_request_structure` before any command looks at its fields; the
limits here (:data:`MAX_DEPTH`, :data:`MAX_STRING`, :data:`MAX_ELEMENTS`, 64-bit integers) bound
what a hostile client can make the channel walk. :mod:`rtctl.operator.commands` then checks
each command's own fields.
"""
from __future__ import annotations

import json

import msgpack

COMMANDS = {
    "status": set(),
    "set_gains": {"kp", "kd"},
    "set_target": {"goal", "duration"},
    "set_cpg": {"amplitude", "frequency", "phase", "center", "pattern"},
    "set_impedance": {"stiffness", "damping", "damping_ratio", "nullspace_stiffness"},
    "estop": {"reason"},
    "rearm": set(),
}
OPEN_COMMANDS = frozenset({"status", "estop"})
HELLO = "hello"                       # opens a session (rtctl.operator.handshake); open, changes nothing
HELLO_FIELDS = {"nonce"}
COMMON = {"cmd", "id"}
AUTH_FIELDS = {"session", "proof"}    # what a command that needs the token carries instead of it
MAX_REQUEST_BYTES = 65536   # ZMQ_MAXMSGSIZE of the control socket: a longer frame drops the connection unread
MAX_REPLY_BYTES = 1 << 20   # ZMQ_MAXMSGSIZE of a client's socket (a status reply: a few kB)
MAX_DEPTH = 3          # the request map, a list in it, the numbers in the list
MAX_STRING = 1024      # characters of any string in a request
MAX_ELEMENTS = 256     # values (all levels) in one request; a longer walk is not started
INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1


class Refused(ValueError):
    """A request that is refused; the message is the reason sent back."""


def check_request_structure(request) -> dict:
    """Refuse what no command can use, naming the field: a non-map, non-string keys, nesting deeper
    than :data:`MAX_DEPTH`, integers beyond 64 bit, strings that are not valid UTF-8 or longer than
    :data:`MAX_STRING`, types other than nil, bool, int, float, str, list and map. Iterative: no
    recursion limit to hit."""
    if not isinstance(request, dict):
        raise Refused(f"a request must be a map with a 'cmd' field, got {type(request).__name__}")
    stack = [(request, "request", 1)]
    seen = 0
    while stack:
        value, path, depth = stack.pop()
        seen += 1
        if seen > MAX_ELEMENTS:
            raise Refused(f"request: more than {MAX_ELEMENTS} values")
        if depth > MAX_DEPTH:
            raise Refused(f"{path}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, (dict, list, tuple)) and seen + len(value) > MAX_ELEMENTS:
            raise Refused(f"request: more than {MAX_ELEMENTS} values")   # before walking (or listing) any of them
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise Refused(f"{path}: field names must be strings, got {type(key).__name__}")
                _check_string(key, f"{path} field name")
                stack.append((item, key if depth == 1 else f"{path}.{key}", depth + 1))
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                stack.append((item, f"{path}[{i}]", depth + 1))
        elif isinstance(value, str):
            _check_string(value, path)
        elif isinstance(value, bool) or value is None or isinstance(value, float):
            pass
        elif isinstance(value, int):
            if not INT64_MIN <= value <= INT64_MAX:
                raise Refused(f"{path}: integer out of the 64-bit range")
        else:
            raise Refused(f"{path}: unsupported type {type(value).__name__}")
    return request


def check_command(request, common_fields, auth_fields=frozenset()) -> tuple[str, dict]:
    """(command, request) once the structure is sound, the command known (``hello`` too) and every field one
    the command or ``common_fields`` allows, and ``auth_fields`` on a command that needs the token; raises
    :class:`Refused` naming the first that is not. A ``token`` field is refused: the token is never sent."""
    check_request_structure(request)
    cmd = request.get("cmd")
    if cmd == HELLO:
        fields = HELLO_FIELDS
    elif isinstance(cmd, str) and cmd in COMMANDS:
        fields = COMMANDS[cmd] | (set() if cmd in OPEN_COMMANDS else auth_fields)
    else:
        raise Refused(f"cmd: unknown or missing command {str(cmd)[:40]!r}; commands: {sorted(COMMANDS)}")
    if "token" in request:
        raise Refused(f"{cmd}: token: the token is never sent; the client proves it holds it (hello, then the "
                      "command with its session and proof: rtctl control and the dashboard do)")
    unknown = sorted(set(request) - fields - common_fields)
    if unknown:
        raise Refused(f"{cmd}: unknown field '{unknown[0]}'; allowed: {sorted(fields)}")
    return cmd, request


def _check_string(text: str, path: str) -> None:
    if len(text) > MAX_STRING:
        raise Refused(f"{path}: string longer than {MAX_STRING} characters")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise Refused(f"{path}: not valid unicode (lone surrogate)") from None


def decode_request(raw: bytes):
    """(request, reply as JSON?) from one frame; raises :class:`Refused` naming what is wrong. The request's
    structure is checked by :meth:`ControlServer.handle` (:func:`check_request_structure`)."""
    use_json = raw[:1] in (b"{", b"[", b" ", b"\n", b"\t", b"\r")
    if not raw:
        raise Refused("empty request frame")
    if use_json:
        try:
            request = json.loads(raw.decode("utf-8"))
        except RecursionError:
            raise Refused(f"request: nested deeper than {MAX_DEPTH} levels") from None
        except (UnicodeDecodeError, ValueError) as exc:
            raise Refused(f"request is not valid JSON: {str(exc)[:200]}") from None
    else:
        try:
            request = msgpack.unpackb(raw, raw=False, strict_map_key=False, max_array_len=MAX_ELEMENTS,
                                      max_map_len=MAX_ELEMENTS, max_str_len=4 * MAX_STRING, max_bin_len=MAX_STRING,
                                      max_ext_len=MAX_STRING)
        except UnicodeDecodeError:
            raise Refused("request: a msgpack string is not valid UTF-8") from None
        except (msgpack.exceptions.StackError, RecursionError):
            raise Refused(f"request: nested deeper than {MAX_DEPTH} levels") from None
        except ValueError as exc:   # a limit given above, met before anything of that length was built
            if "max_array_len" in str(exc) or "max_map_len" in str(exc):
                raise Refused(f"request: more than {MAX_ELEMENTS} values") from None
            if "_len" in str(exc):
                raise Refused(f"request: a string longer than {MAX_STRING} characters") from None
            raise Refused(f"request is neither JSON nor msgpack ({type(exc).__name__})") from None
        except Exception as exc:  # noqa: BLE001  (msgpack raises several kinds on garbage)
            raise Refused(f"request is neither JSON nor msgpack ({type(exc).__name__})") from None
    return request, use_json


def encode_reply(reply: dict, use_json: bool) -> bytes:
    """The reply's bytes; a reply that cannot be encoded becomes an error reply that can."""
    try:
        return json.dumps(reply).encode() if use_json else msgpack.packb(reply, use_bin_type=True)
    except (TypeError, ValueError, OverflowError, UnicodeEncodeError):
        safe = {"ok": False, "error": "the reply could not be encoded"}
        return json.dumps(safe).encode() if use_json else msgpack.packb(safe, use_bin_type=True)
