"""A second, independent master brings the emulated EtherCAT line up over a veth pair: KickCAT scans it,
reads the SII (two words per EEPROM read, to the end category), maps the PDOs of the SII TxPDO / RxPDO
categories, requests PRE-OP, SAFE-OP and OP (AL control with the acknowledge bit, ETG.1000.6) and exchanges
process data; a slave refusing OP is reported as an AL error (the code is in the emulator's STATS: KickCAT's Python
exception does not carry it). The namespace is the test's own.

KickCAT's link reads its (here absent) redundant interface first, for its whole timeout, on each blocking
exchange, and a frame not back within it fails the bring-up: the timeout is 25 ms (not the default 2 ms, which
a Python emulator on a busy machine does not always answer within) and a failed bring-up is tried again, up to
three times, as a master retries a scan."""
from __future__ import annotations

import contextlib
import struct

import pytest

from rtctl.hil.ethercat import netns

from ethercat_line import emulated_line

kickcat = pytest.importorskip("kickcat")
pytestmark = pytest.mark.slow
WHY_NOT = netns.unavailable()
if WHY_NOT:
    pytest.skip(WHY_NOT, allow_module_level=True)

N = 3
LINK_TIMEOUT_S = 0.025
BRING_UP_TRIES = 3
STATE_TIMEOUT_S = 3.0


@contextlib.contextmanager
def emulated_bus(*args: str):
    """(bus, stop) with the line at PRE-OP; ``stop()`` the emulator's STATS. The emulator is stopped and the
    namespace deleted on exit, also when the bring-up fails."""
    with emulated_line("--slaves", str(N), *args) as (ns, _proc, stop):
        for attempt in range(BRING_UP_TRIES):
            with netns.inside(ns):
                link = kickcat.create_link(netns.MASTER_END, "")
            link.set_timeout(LINK_TIMEOUT_S)
            bus = kickcat.Bus(link)
            try:
                bus.init(0.1)                       # PDI watchdog 100 ms
                break
            except RuntimeError:
                if attempt == BRING_UP_TRIES - 1:
                    raise
        yield bus, stop


def test_kickcat_brings_the_line_to_op_and_exchanges_process_data():
    with emulated_bus() as (bus, stop):
        slaves = bus.slaves()
        assert [s.address for s in slaves] == [1001, 1002, 1003]         # KickCAT's station addresses
        assert all(bus.get_state(s) == kickcat.State.PREOP for s in slaves)
        bus.create_mapping()
        assert [(s.output_size, s.input_size) for s in slaves] == [(7, 7)] * N
        bus.request_state(kickcat.State.SAFE_OP)
        bus.wait_for_state(kickcat.State.SAFE_OP, STATE_TIMEOUT_S)
        for k, s in enumerate(slaves):
            s.set_output_bytes(struct.pack("<Hib", 0x000F, -1000 * (k + 1), 8))
        bus.process_data()
        bus.request_state(kickcat.State.OPERATIONAL)
        bus.wait_for_state(kickcat.State.OPERATIONAL, STATE_TIMEOUT_S, lambda: bus.process_data())
        for _ in range(3):
            bus.process_data()
        inputs = [struct.unpack("<Hib", bytes(s.input_data)) for s in slaves]
        assert inputs == [(0x0237, -1000 * (k + 1), 8) for k in range(N)]
        stats = stop()
        assert [(s["state"], s["target_position"]) for s in stats["slaves"]] == [
            ("OP", -1000 * (k + 1)) for k in range(N)]


def test_kickcat_names_the_al_status_code_of_a_slave_refusing_op():
    with emulated_bus("--refuse-op", "1", "0x001A") as (bus, stop):
        bus.create_mapping()
        bus.request_state(kickcat.State.SAFE_OP)
        bus.wait_for_state(kickcat.State.SAFE_OP, STATE_TIMEOUT_S)
        bus.process_data()
        bus.request_state(kickcat.State.OPERATIONAL)
        with pytest.raises(kickcat.ErrorAL) as refused:        # the AL status error bit with a code
            bus.wait_for_state(kickcat.State.OPERATIONAL, STATE_TIMEOUT_S, lambda: bus.process_data())
        assert "State transition error" in str(refused.value)
        stats = stop()
        assert [(s["state"], s["al_status_code"]) for s in stats["slaves"]] == [
            ("OP", 0), ("SAFE-OP", 0x001A), ("OP", 0)]
