"""Publishing sockets whose subscriptions are bounded: what any local process can make a publisher keep.

A ZeroMQ publisher keeps every subscription its subscribers send, in a trie, for as long as they stay
connected (RFC 29/PUBSUB: filtering happens at the publisher), and nothing in libzmq bounds them: one SUB
socket subscribing with an 8 MB topic grew the publisher process by about 400 MB, and 300 000 distinct
200-byte topics by 70 MB. The stream's topics are a few short names (``rtctl/meta``, ``rtctl/samples``,
``rtctl/event``; PlotJuggler subscribes to everything with ``""``), so:

* a subscription message longer than :data:`MAX_SUBSCRIPTION_BYTES` is a protocol error (``ZMQ_MAXMSGSIZE``):
  libzmq drops that connection before it has read the message;
* the sockets are XPUBs, which pass each new subscription and each last unsubscription up to
  :meth:`SubscriptionGuard.read` (``zmq_socket(3)``): it mirrors the set of distinct topics and, when more than
  :data:`MAX_SUBSCRIPTIONS` are subscribed at once or more than :data:`SUBSCRIPTIONS_READ` messages arrived
  since the last read (a flood), disconnects every subscriber of the socket (shuts their connections down
  under libzmq, which then forgets their subscriptions; the listening socket stays bound, so nobody can take
  the endpoint meanwhile). Subscribers reconnect and subscribe again by themselves (ZeroMQ's reconnect): a
  flood costs the honest ones a few batches, counted as lost by their sequence numbers, never memory.

Disconnecting reads this process's descriptors from ``/proc/self/fd`` (``/dev/fd`` elsewhere).
"""
from __future__ import annotations

import os
import socket

import zmq

MAX_SUBSCRIPTION_BYTES = 256   # the longest subscription message accepted (the stream's topics have 13 bytes)
MAX_SUBSCRIPTIONS = 64         # distinct topics subscribed at once, over all subscribers
SUBSCRIPTIONS_READ = 256       # messages read per call of SubscriptionGuard.read; more waiting is a flood
MAX_STREAM_MESSAGE_BYTES = 16 << 20   # what a subscriber of the stream accepts per message (a batch: < 3 MB)


def publishing_socket(ctx: zmq.Context, sndhwm: int, verbose: bool = False, linger: int = 0):
    """An XPUB that accepts at most :data:`MAX_SUBSCRIPTION_BYTES` per message from a subscriber;
    ``verbose``: every subscription is passed up, not only a topic's first (a newcomer can be greeted)."""
    sock = ctx.socket(zmq.XPUB)
    sock.setsockopt(zmq.LINGER, linger)
    sock.setsockopt(zmq.SNDHWM, sndhwm)
    sock.setsockopt(zmq.RCVHWM, SUBSCRIPTIONS_READ)
    sock.setsockopt(zmq.MAXMSGSIZE, MAX_SUBSCRIPTION_BYTES)
    if verbose:
        sock.setsockopt(zmq.XPUB_VERBOSE, 1)
    return sock


class SubscriptionGuard:
    """Reads a publishing socket's subscriptions (from its publisher thread) and keeps them bounded."""

    def __init__(self, sock):
        self.sock = sock
        self.endpoint = sock.getsockopt(zmq.LAST_ENDPOINT).decode()
        self.topics: set[bytes] = set()
        self.resets = 0           # times every subscriber was disconnected
        self.disconnected = 0     # connections shut down by those resets
        self.subscribed: list[bytes] = []   # the topics of the subscriptions the last read took, in order

    def read(self) -> bool:
        """Take the subscription messages waiting; True if one subscribes (a newcomer, with ``verbose``; their
        topics in :attr:`subscribed`). Disconnects every subscriber when the subscriptions exceed the bounds."""
        joined = flood = False
        self.subscribed = []
        for count in range(SUBSCRIPTIONS_READ + 1):
            try:
                message = self.sock.recv(flags=zmq.NOBLOCK)
            except zmq.Again:
                break
            if count == SUBSCRIPTIONS_READ:
                flood = True
                break
            if message[:1] == b"\x01":
                self.topics.add(message[1:])
                self.subscribed.append(message[1:])
                joined = True
            elif message[:1] == b"\x00":
                self.topics.discard(message[1:])
        if flood or len(self.topics) > MAX_SUBSCRIPTIONS:
            self.disconnect_all()
            return False
        return joined

    def disconnect_all(self) -> int:
        """Shut down every connection accepted on the socket's endpoint; returns how many."""
        self.resets += 1
        self.topics.clear()
        self.subscribed = []          # nobody is left to answer
        local = _local_address(self.endpoint)
        shut = 0
        for fd in _descriptors():
            try:
                copy = os.dup(fd)
            except OSError:          # closed meanwhile
                continue
            try:
                conn = socket.socket(fileno=copy)
            except OSError:          # not a socket: the copy is not the socket's to close
                os.close(copy)
                continue
            try:
                if _same_address(conn.getsockname(), local):
                    conn.getpeername()          # the listening socket has no peer: OSError, left alone
                    conn.shutdown(socket.SHUT_RDWR)
                    shut += 1
            except OSError:
                pass
            finally:
                conn.close()
        self.disconnected += shut
        return shut


def _descriptors() -> list[int]:
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            return [int(name) for name in os.listdir(folder) if name.isdigit()]
        except OSError:
            continue
    return []


def _local_address(endpoint: str):
    """What ``getsockname`` returns on a connection accepted on ``endpoint``."""
    scheme, _, rest = endpoint.partition("://")
    if scheme == "ipc":
        return rest
    host, _, port = rest.rpartition(":")
    return host.strip("[]"), int(port)


def _same_address(name, local) -> bool:
    if isinstance(local, str):
        return isinstance(name, (str, bytes)) and os.fsdecode(name) == local
    return isinstance(name, tuple) and (name[0], name[1]) == local
