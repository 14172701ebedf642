"""Emergency messages as the drivers report them: the CiA 301 EMCY decoded (7.2.7 error codes, 7.5.2.2 error
register), and the EtherCAT driver's schedule of mailbox reads (ETG.1000.6 5.6.4: a CoE emergency waits in the
slave's mailbox until the master reads it)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from rtctl.drivers.cia402 import emergency_line, error_code_name
from rtctl.drivers.ethercat.emergency import Emergencies


@pytest.mark.parametrize("code, name", [
    (0x2310, "continuous over current"),      # CiA 402-2's own code
    (0x2311, "current, device output side"),  # its class by the high byte
    (0x8100, "communication"),
    (0x8130, "life guard or heartbeat error"),
    (0x4ABC, "temperature"),                  # no 0x4A class: the high nibble's
    (0xFF42, "device specific"),
    (0x0000, "error reset or no error")])
def test_error_codes_are_named_by_code_then_class(code, name):
    assert error_code_name(code) == name


def test_an_emergency_is_one_phrase_with_its_register_bits_and_manufacturer_bytes():
    assert emergency_line(0x2310, 0x03) == ("EMCY 0x2310 (continuous over current), error register 0x03 "
                                            "(generic, current)")
    assert emergency_line(0x8130, 0x91, bytes([0, 0x12, 0, 0, 0x34])) == (
        "EMCY 0x8130 (life guard or heartbeat error), error register 0x91 (generic, communication, manufacturer), "
        "manufacturer bytes 00 12 00 00 34")
    assert emergency_line(0, 0) == "EMCY 0x0000 (error reset or no error), error register 0x00 (none)"


class Slave:
    """pysoem's slave as :class:`Emergencies` uses it: emergency callbacks, and ``mbx_receive`` reading one
    queued message (an EMCY to the callbacks, or an error pysoem raises)."""

    def __init__(self):
        self.callbacks, self.queue, self.reads = [], [], 0

    def add_emergency_callback(self, callback):
        self.callbacks.append(callback)

    def mbx_receive(self):
        self.reads += 1
        if not self.queue:
            return 1
        message = self.queue.pop(0)
        if isinstance(message, Exception):
            raise message
        for callback in self.callbacks:
            callback(message)
        return 0


def emcy(code, register, b1=0, w1=0, w2=0):
    return SimpleNamespace(error_code=code, error_reg=register, b1=b1, w1=w1, w2=w2)


def test_one_mailbox_is_read_every_poll_cycles_in_turn():
    slaves = [Slave() for _ in range(3)]
    emergencies = Emergencies(slaves, poll_cycles=4)
    for _ in range(24):
        emergencies.poll()
    assert [s.reads for s in slaves] == [2, 2, 2]          # cycles 4, 16 / 8, 20 / 12, 24
    never = [Slave()]
    silent = Emergencies(never, poll_cycles=0)
    for _ in range(100):
        silent.poll()
    assert never[0].reads == 0


def test_a_faulted_drive_s_mailbox_is_read_until_its_emergency_and_errors_are_counted():
    slaves = [Slave(), Slave()]
    emergencies = Emergencies(slaves, poll_cycles=0, reads_at_fault=4)
    slaves[1].queue = [RuntimeError("a stray SDO response"), emcy(0x2310, 0x03, 0, 0x1234, 0)]
    assert emergencies.at_fault(1) == ("EMCY 0x2310 (continuous over current), error register 0x03 (generic, "
                                       "current), manufacturer bytes 00 34 12 00 00")
    assert (slaves[1].reads, emergencies.failed_reads, emergencies.count) == (2, 1, 1)
    assert emergencies.at_fault(0) == "" and slaves[0].reads == 4           # none came: bounded reads
