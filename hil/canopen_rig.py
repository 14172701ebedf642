"""The CANopen test rig: the emulated CiA 402 drives in a thread on python-can's virtual bus, python-canopen's
``Network`` as the master and a sniffer that records every frame with its arrival time (monotonic clock)."""
import threading
import time
import uuid

import can
import canopen
import numpy as np
from canopen.sdo import SdoAbortedError

from rtctl.drivers.can.objects import drive_object_dictionary
from rtctl.hil.can_emulator import Cia402Emulator, run_in_thread
from rtctl.hil.can_robot import build_arm2, make_plant

MARGIN = 0.15  # s: scheduling slack of the emulator thread and the notifier on a loaded machine
MARKER = 0x07F  # a frame ID outside CiA 301's predefined connection set: the test's in-order marker on the bus


class Sniffer(can.Listener):
    def __init__(self):
        self.frames = []

    def on_message_received(self, msg):
        self.frames.append((time.monotonic(), msg.arbitration_id, bytes(msg.data)))

    def of(self, cob, since=0.0):
        return [(t, d) for t, c, d in list(self.frames) if c == cob and t >= since]


class Rig:
    def __init__(self):
        self.channel = f"conf-{uuid.uuid4().hex}"
        self.sniffer = Sniffer()
        self.net = canopen.Network()
        self.net.NOTIFIER_CYCLE = 0.05       # a prompt disconnect
        self.net.listeners.append(self.sniffer)
        self.net.connect(interface="virtual", channel=self.channel)
        plant = make_plant(build_arm2())
        plant.reset(np.array([0.1, 0.2]))
        self.bus = can.Bus(interface="virtual", channel=self.channel)
        self.emu = Cia402Emulator(self.bus, plant, np.array([0, 1]), [1, 2], ratio=10.0)
        self.drive = self.emu.drives[0]
        self.stop = threading.Event()
        run_in_thread(self.emu, self.stop, 0.002)
        # Both drives' power-on boot-ups (CiA 301 7.3.2.2.1) are on the bus before a test starts, so a test
        # that watches a node from its start never sees a late power-on message as a reaction to it.
        assert self.wait(lambda: all(self.sniffer.of(0x700 + n) for n in (1, 2)), 5.0), "no power-on boot-up"
        self.node = canopen.BaseNode402(1, drive_object_dictionary())
        self.net.add_node(self.node)
        self.node.nmt.state = "PRE-OPERATIONAL"
        self.node.sdo.RESPONSE_TIMEOUT = 0.3

    def marker(self):
        """Send a marker frame (an ID no device uses) from the emulator's side and wait until the sniffer has it;
        its index in ``sniffer.frames``: frames after it were sent by the emulator after this call."""
        def markers():
            return [k for k, (_t, c, _d) in enumerate(list(self.sniffer.frames)) if c == MARKER]
        before = len(markers())
        self.bus.send(can.Message(arbitration_id=MARKER, data=b"", is_extended_id=False))
        assert self.wait(lambda: len(markers()) > before, 5.0), "marker lost"
        return markers()[-1] + 1

    def after_syncs(self, total):
        """Return once the emulator has taken ``total`` SYNCs in all and the sniffer holds every frame it sent
        for them. Not a fixed sleep: on a loaded machine the emulator may still be working through the SYNCs.
        The emulator serves frames in order, so its answer to an SDO upload sent now comes after every TPDO of
        those SYNCs, and the notifier hands frames to the sniffer in order."""
        assert self.wait(lambda: self.emu.syncs >= total, 5.0), (self.emu.syncs, total)
        self.node.sdo[0x1000].raw

    def abort_of(self, fn):
        """The abort code the device answers ``fn``'s SDO request with (AssertionError if it does not abort)."""
        try:
            fn()
        except SdoAbortedError as exc:
            return exc.code
        raise AssertionError("the SDO request was not aborted")

    def wait(self, predicate, timeout=1.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.002)
        return predicate()

    def enable_cst(self):
        """PDOs as the driver maps them, OPERATIONAL, SYNC every 5 ms, CST, OPERATION ENABLED."""
        node = self.node
        node.setup_402_state_machine()
        node.nmt.state = "OPERATIONAL"
        self.net.sync.start(0.005)
        node.rpdo[1].start(0.005)
        node.sdo[0x6060].raw = 10
        node.state = "OPERATION ENABLED"

    def close(self):
        self.net.sync.stop()
        self.stop.set()
        time.sleep(0.01)
        self.net.disconnect()
        self.bus.shutdown()


def map_tpdo(rig, trans, inhibit=None, event_timer=None):
    tpdo = rig.node.tpdo[1]
    tpdo.read()
    tpdo.clear()
    tpdo.add_variable(0x6041)
    tpdo.trans_type, tpdo.inhibit_time, tpdo.event_timer = trans, inhibit, event_timer
    tpdo.enabled = True
    tpdo.save()
