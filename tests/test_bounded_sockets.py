"""Bounded sockets: what another local user sends the telemetry publisher costs it a bounded amount of memory.

* The attack as found: one SUB socket subscribing with an 8 MB topic grew the publisher process by ~400 MB
  (libzmq keeps each subscription in a trie; nothing bounded its size), and distinct subscriptions grow it
  without end (150 000 of 200 bytes on each of the stream and PlotJuggler sockets: ~37 MB). Both, sent by
  another user (uid 65534) to the publisher process, now grow it by less than :data:`GROWTH_MB`; once the
  attacker has gone, a subscriber gets the stream.
* Over :data:`~rtctl.telemetry.subscriptions.MAX_SUBSCRIPTIONS` distinct topics, every subscriber is
  disconnected while the endpoint stays bound (nobody can take it meanwhile); honest subscribers reconnect
  by themselves and get the stream again. Disconnecting them leaves no descriptor open.
"""
import os
import time

import msgpack
import pytest
import zmq

from other_user import another_user
from rtctl.telemetry import Telemetry
from rtctl.telemetry.schema import TOPIC_SAMPLES
from rtctl.telemetry.subscriptions import MAX_SUBSCRIPTIONS, SubscriptionGuard, publishing_socket
from telemetry_helpers import make_loop, subscriber, wait_meta

GROWTH_MB = 24          # the unbounded publisher grew by ~37 MB (distinct topics) and ~400 MB (the 8 MB topic)
TOPICS = 150_000


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _subscribe_flood(held, endpoints, topic_bytes, topics):
    """One SUB subscribing with a ``topic_bytes`` topic and one XSUB sending ``topics`` distinct subscriptions,
    to each endpoint; they stay connected (and resubscribe when disconnected) until the test is done."""
    ctx = zmq.Context()
    held.append(ctx)
    for endpoint in endpoints:
        big = ctx.socket(zmq.SUB)
        big.connect(endpoint)
        big.setsockopt(zmq.SUBSCRIBE, b"x" * topic_bytes)
        many = ctx.socket(zmq.XSUB)
        many.connect(endpoint)
        held += [big, many]
        time.sleep(0.1)
        for i in range(topics):
            many.send(b"\x01%0200d" % i)
    return {}


@pytest.mark.slow
def test_another_user_s_subscriptions_cost_the_publisher_process_a_bounded_amount_of_memory():
    loop = make_loop()
    tel = Telemetry(endpoint="tcp://127.0.0.1:0", plotjuggler_endpoint="tcp://127.0.0.1:0",
                    process=True).attach(loop).start()
    try:
        publisher = tel._relay.pid
        time.sleep(0.5)
        before = _rss_mb(publisher)
        with another_user(_subscribe_flood, [tel.endpoint, tel.plotjuggler_endpoint], 8 << 20, TOPICS) as attacker:
            assert "error" not in attacker.result, attacker.result
            time.sleep(1.0)
            grown = _rss_mb(publisher) - before
        assert grown < GROWTH_MB, f"the publisher process grew by {grown:.1f} MB (attacker {attacker.result})"
        sub = subscriber(tel.endpoint)
        wait_meta(sub)
        loop.run(cycles=200)
        samples = 0
        while sub.poll(1000) and samples < 200:
            topic, payload = sub.recv_multipart()
            samples += msgpack.unpackb(payload)["count"] if topic == TOPIC_SAMPLES else 0
        sub.close(linger=0)
        assert samples == 200
    finally:
        tel.close()


def test_past_max_subscriptions_every_subscriber_is_disconnected_the_endpoint_stays_bound_and_they_come_back():
    loop = make_loop()
    tel = Telemetry(endpoint="tcp://127.0.0.1:0", meta_period=0.05).attach(loop).start()
    ctx = zmq.Context.instance()
    honest = subscriber(tel.endpoint)
    greedy = ctx.socket(zmq.SUB)
    greedy.setsockopt(zmq.LINGER, 0)
    try:
        wait_meta(honest)
        greedy.connect(tel.endpoint)
        for i in range(MAX_SUBSCRIPTIONS - 1):
            greedy.setsockopt(zmq.SUBSCRIBE, b"rtctl/%d" % i)
        time.sleep(0.3)
        assert tel.subscriber_resets == 0              # the honest one's topic and 63 more: at the bound
        greedy.setsockopt(zmq.SUBSCRIBE, b"rtctl/one-more")
        end = time.monotonic() + 10
        while tel.subscriber_resets == 0 and time.monotonic() < end:
            time.sleep(0.01)
        assert tel.subscriber_resets >= 1
        squatter = ctx.socket(zmq.PUB)
        with pytest.raises(zmq.ZMQError, match="Address already in use"):
            squatter.bind(tel.endpoint)
        squatter.close(linger=0)
        greedy.close(linger=0)
        wait_meta(honest)                              # reconnected by ZeroMQ, subscribed again
        resets = tel.subscriber_resets
        time.sleep(0.3)
        assert tel.subscriber_resets == resets
    finally:
        honest.close(linger=0)
        greedy.close(linger=0)
        tel.close()


def test_disconnecting_every_subscriber_leaves_no_descriptor_behind():
    """disconnect_all looks at each of the process's descriptors through a copy; the copies of those that are no
    sockets (a pipe, a file) were left open: one per such descriptor per reset, which ran a test process with
    the thread-mode publisher out of descriptors under a flood of subscriptions."""
    pub = publishing_socket(zmq.Context.instance(), 10)
    pub.bind("tcp://127.0.0.1:0")
    guard = SubscriptionGuard(pub)
    pipe = os.pipe()
    try:
        before = set(os.listdir("/proc/self/fd"))
        shut = [guard.disconnect_all() for _ in range(50)]
        # none left open by it (another thread of the test process may close one of its own meanwhile)
        assert set(os.listdir("/proc/self/fd")) <= before
        assert shut == [0] * 50                      # nobody was connected: no descriptor is a connection
    finally:
        for fd in pipe:
            os.close(fd)
        pub.close(linger=0)
