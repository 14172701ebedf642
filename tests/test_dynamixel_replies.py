"""Which status packet answers a configuration-time request of the Dynamixel driver, byte for byte.

A status packet carries its servo's ID but not the instruction it answers (ROBOTIS e-manual, Protocol 2.0,
Status Packet), so the driver drains what is pending before each request and then takes only the status packet
from the addressed ID whose Length the request fixes (Instruction Details: READ returns the requested bytes,
WRITE none, PING three). A test plays the servo on a pseudo-terminal: it checks the exact request bytes and
answers with exact bytes, a stale packet first.
"""
from __future__ import annotations

import os
import pty
import threading
import time

import pytest
from rtctl.drivers import create_driver
from rtctl.drivers.dynamixel import BusError
from rtctl.drivers.dynamixel import protocol as P
from rtctl.drivers.dynamixel.control_table import CURRENT_CONTROL
from rtctl.drivers.dynamixel.driver import NoReply
from rtctl.hil.dynamixel_emulator import ServoChain, hil_arm, serve

OPERATING_MODE, MAX_POSITION = 11, 48
TIMEOUT = 0.5       # s per attempt: far longer than this test's responder needs, even on a loaded machine


class ScriptedServo:
    """Answers each expected request (exact bytes) with the given bytes, in order, from a thread."""

    def __init__(self, master: int, script):
        self.master, self.script, self.failures = master, list(script), []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        for request, reply in self.script:
            got = b""
            while len(got) < len(request):
                got += os.read(self.master, len(request) - len(got))
            if got != request:
                self.failures.append((got.hex(" "), request.hex(" ")))
                return
            os.write(self.master, reply)

    def done(self):
        self.thread.join(5.0)
        assert not self.thread.is_alive() and not self.failures, self.failures


@pytest.fixture
def bus():
    master, slave = pty.openpty()
    driver = create_driver("dynamixel", hil_arm(2), port=os.ttyname(slave), read_timeout=TIMEOUT, retries=0)
    driver._open()
    yield driver, master
    driver._close()
    os.close(master)
    os.close(slave)


READ_MODE = P.read_packet(1, OPERATING_MODE, 1)
MODE_REPLY = P.encode_status(1, 0, b"\x00")                      # current control


def test_read_request_and_reply_bytes_are_the_emanual_layout():
    """Protocol 2.0, Read: ID 1 reads 1 byte at 11; its status packet has Length 5 = 1 data byte + 4."""
    assert READ_MODE.hex(" ") == "ff ff fd 00 01 07 00 02 0b 00 01 00 " + READ_MODE[-2:].hex(" ")
    assert MODE_REPLY[5] | MODE_REPLY[6] << 8 == 5 and P.decode(MODE_REPLY).params == b"\x00"


def test_a_status_packet_pending_before_the_request_is_drained_and_counted(bus):
    driver, master = bus
    stale = P.encode_status(1, 0, b"\x03")                       # position control: a wrong value of the same size
    os.write(master, stale)
    servo = ScriptedServo(master, [(READ_MODE, MODE_REPLY)])
    assert driver.read_field(0, "operating_mode") == 0
    servo.done()
    e = driver.health.extra
    assert (e["late_packets"], e["late_bytes"], e["unexpected_packets"]) == (1, len(stale), 0)


STALE = {
    "another servo's read reply": P.encode_status(2, 0, b"\x03"),
    "a PING reply": P.encode_status(1, 0, P.u16(1020) + b"\x30"),
    "a WRITE reply": P.encode_status(1, 0, b""),
    "a 4-byte read reply": P.encode_status(1, 0, P.u32(4095)),
    "an instruction packet": P.read_packet(1, OPERATING_MODE, 1),
}


@pytest.mark.parametrize("stale", STALE.values(), ids=STALE.keys())
def test_a_late_packet_in_the_reply_window_is_skipped_and_counted(bus, stale):
    driver, master = bus
    servo = ScriptedServo(master, [(READ_MODE, stale + MODE_REPLY)])
    assert driver.read_field(0, "operating_mode") == 0
    servo.done()
    e = driver.health.extra
    assert (e["unexpected_packets"], e["late_packets"], e["missing_packets"]) == (1, 0, 0)


def test_a_write_takes_only_a_reply_without_parameters(bus):
    driver, master = bus
    write = P.write_packet(1, OPERATING_MODE, b"\x00")
    servo = ScriptedServo(master, [(write, P.encode_status(1, 0, b"\x03") + P.encode_status(1, 0))])
    driver.write_field(0, "operating_mode", 0)
    servo.done()
    assert driver.health.extra["unexpected_packets"] == 1


def test_only_wrong_replies_fail_in_one_line_naming_servo_register_and_what_came(bus):
    driver, master = bus
    wrong = P.encode_status(1, 0, P.u32(4095))
    servo = ScriptedServo(master, [(READ_MODE, wrong)] * 2)
    with pytest.raises(NoReply) as failure:
        driver.read_field(0, "operating_mode")
    servo.done()
    assert str(failure.value) == (
        f"{driver.name}: read operating_mode (address 11, 1 bytes): no reply from servo 1 within 500 ms on "
        f"{driver.port} at 57600 bps after 2 attempts; came instead: status from ID 1 (ok, 4 parameter bytes), "
        "status from ID 1 (ok, 4 parameter bytes)")
    assert driver.health.extra["unexpected_packets"] == 2 and driver.health.extra["missing_packets"] == 2


def test_an_error_status_without_data_fails_the_read_never_passes_as_a_value(bus):
    """Protocol 2.0, Status Packet, Error: 0x07 access error (here: a read beyond the table)."""
    driver, master = bus
    servo = ScriptedServo(master, [(P.read_packet(1, MAX_POSITION, 4), P.encode_status(1, P.ERROR_ACCESS))])
    with pytest.raises(BusError, match=r"servo 1: read max_position_limit \(address 48, 4 bytes\): access error$"):
        driver.read_field(0, "max_position_limit")
    servo.done()
    assert driver.health.extra["status_errors"] == 1


def drain_until_quiet(driver, quiet=0.1, limit=2.0):
    """Count the replies still on their way (as the driver drains before each request) until none came for
    ``quiet`` s."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        before = driver.health.extra["late_bytes"]
        time.sleep(quiet)
        driver._drain()
        if driver.health.extra["late_bytes"] == before:
            return


CONFIGURE_READS = 2 * 4     # per servo: hardware error, return delay .. operating mode, current limit, position limits


@pytest.mark.parametrize("late_read", range(1, CONFIGURE_READS + 1))
def test_a_late_reply_during_configure_never_passes_for_another_read(late_read):
    """The emulator sends the status packet of configure's ``late_read``-th READ once more, just before the reply
    to the next instruction packet (after the driver drained the port and sent that instruction). Configure reads
    every item right: the late one is skipped, as every reply not taken in its window is counted late or
    unexpected (exactly: each reply the driver missed, plus the injected one)."""
    chain = ServoChain(hil_arm(2), late_read=late_read)
    master, slave = pty.openpty()
    stop = threading.Event()
    server = threading.Thread(target=serve, args=(chain, master, stop.is_set, slave), daemon=True)
    server.start()
    driver = create_driver("dynamixel", hil_arm(2), port=os.ttyname(slave))
    try:
        driver.configure()
        driver.ping(1)              # the next instruction packet after configure's last READ
        drain_until_quiet(driver)
    finally:
        driver.close()
        stop.set()
        server.join(5.0)
        os.close(master)
        os.close(slave)
    assert chain.stats["late_replies"] == 1
    for k, servo in enumerate(chain.servos):
        assert (servo.get("return_delay_time"), servo.get("operating_mode")) == (0, CURRENT_CONTROL)
        assert driver._current_limit[k] == servo.get("current_limit") == 1193
        assert (driver._pos_min[k], driver._pos_max[k]) == (servo.get("min_position_limit"),
                                                           servo.get("max_position_limit")) == (0, 4095)
    e = driver.health.extra
    assert e["late_packets"] + e["unexpected_packets"] == e["missing_packets"] + 1, e
