"""A drive's emergency messages over EtherCAT: CoE emergencies (ETG.1000.6 5.6.4: the CiA 301 EMCY's error code,
error register and five manufacturer bytes) arrive in the slave's mailbox, SM1, which a master reads when it
asks; nothing pushes them. SOEM reads one mailbox message per ``mbx_receive`` and hands an emergency to the
slave's callbacks.

:class:`Emergencies` reads one slave's mailbox every ``poll_cycles`` cycles in turn (one datagram, a mailbox-full
flag in the sync manager's status, then the message only if there is one), and at once the mailbox of a drive
that has just faulted, so that the fault is reported with the drive's own account of it."""
from __future__ import annotations

import functools
import struct

import numpy as np

from ..cia402 import emergency_line

MANUFACTURER = struct.Struct("<BHH")      # pysoem's b1, w1, w2: the EMCY's five manufacturer-specific bytes


class Emergencies:
    """The last emergency of each of ``slaves`` (pysoem's, one per joint), read as above; ``count`` of all
    received, ``failed_reads`` of mailbox reads that raised (a lost datagram: nothing is lost but the read)."""

    def __init__(self, slaves, poll_cycles: int, reads_at_fault: int = 4):
        n = len(slaves)
        self.slaves = list(slaves)
        self.poll_cycles = int(poll_cycles)
        self.reads_at_fault = reads_at_fault
        self.code = np.zeros(n, dtype=np.int64)
        self.register = np.zeros(n, dtype=np.int64)
        self.manufacturer = [bytes(5)] * n
        self.received = np.zeros(n, dtype=np.int64)
        self.count = 0
        self.failed_reads = 0
        self._countdown = self.poll_cycles
        self._next = 0
        for k, slave in enumerate(self.slaves):
            slave.add_emergency_callback(functools.partial(self._received, k))

    def _received(self, k: int, emergency) -> None:
        self.code[k] = emergency.error_code
        self.register[k] = emergency.error_reg
        self.manufacturer[k] = MANUFACTURER.pack(emergency.b1, emergency.w1, emergency.w2)
        self.received[k] += 1
        self.count += 1

    def read(self, k: int) -> None:
        """Slave ``k``'s mailbox read once (an emergency in it reaches :meth:`_received`). Never raises."""
        try:
            self.slaves[k].mbx_receive()
        except Exception:  # noqa: BLE001  (pysoem's mailbox errors: counted, the cycle goes on)
            self.failed_reads += 1

    def poll(self) -> None:
        """Every cycle: one slave's mailbox every ``poll_cycles`` cycles, in turn (0: never)."""
        if not self.poll_cycles:
            return
        self._countdown -= 1
        if self._countdown > 0:
            return
        self._countdown = self.poll_cycles
        self.read(self._next)
        self._next = (self._next + 1) % len(self.slaves)

    def at_fault(self, k: int) -> str:
        """Drive ``k`` has faulted: its mailbox read until an emergency comes (at most ``reads_at_fault`` reads);
        its last emergency as a phrase, or ``""`` if it sent none."""
        before = int(self.received[k])
        for _ in range(self.reads_at_fault):
            self.read(k)
            if self.received[k] > before:
                break
        return self.line(k)

    def line(self, k: int) -> str:
        if not self.received[k]:
            return ""
        return emergency_line(int(self.code[k]), int(self.register[k]), self.manufacturer[k])
