"""A third-party master brings the emulated EtherCAT line up over a veth pair: SOEM (pysoem) scans it, reads
each slave's SII identity, maps the PDOs from the SII categories, takes the line INIT -> PRE-OP -> SAFE-OP ->
OP and exchanges process data with the working counter it expects (ETG.1000.4 working counter of LRW: 3 per
slave with an output and an input FMMU; ETG.1000.6 AL state machine). A raw socket checks a frame's bytes as
they come back through the veth pair. Everything runs in a network namespace the test makes and deletes."""
from __future__ import annotations

import contextlib
import json
import socket
import struct
import time

import pytest

from rtctl.hil.ethercat import netns
from rtctl.hil.ethercat.frame import ETHERTYPE, Command as C, build_frame, datagrams, station

pysoem = pytest.importorskip("pysoem")
pytestmark = pytest.mark.slow
WHY_NOT = netns.unavailable()
if WHY_NOT:
    pytest.skip(WHY_NOT, allow_module_level=True)

N = 3
IDENTITY = ("--vendor-id", "0x00001337", "--product-code", "0x00000402", "--revision", "0x00020001",
            "--name", "Test drive")
RECEIVE_TIMEOUT_US = 200_000      # generous: the line is a Python process on a shared machine
STATE_TIMEOUT_US = 2_000_000


@pytest.fixture
def emulator_with():
    """A function starting the emulator (N slaves, or --robot's) with extra arguments on a veth pair in a fresh
    namespace: returns (namespace, stop), ``stop()`` its STATS; the emulator is killed and the namespace deleted after
    the test."""
    with contextlib.ExitStack() as stack:
        def start(*args: str):
            ns = stack.enter_context(netns.veth_namespace())
            assert ns is not None
            line = () if "--robot" in args else ("--slaves", str(N))      # a robot: one slave per joint
            proc = netns.start_emulator(ns, *line, *IDENTITY, *args)
            stack.callback(lambda: (proc.poll() is None and proc.kill(), proc.wait()))
            stats = {}

            def stop() -> dict:
                if not stats:
                    stats.update(json.loads(netns.stop_emulator(proc).split("STATS ", 1)[1]))
                return stats
            return ns, stop
        yield start


@pytest.fixture
def emulated_line(emulator_with):
    return emulator_with()


def open_master(ns: str):
    master = pysoem.Master()
    with netns.inside(ns):
        master.open(netns.MASTER_END)
    return master


def test_soem_scans_maps_and_exchanges_process_data(emulated_line):
    ns, stop = emulated_line
    master = open_master(ns)
    try:
        assert master.config_init() == N
        for k, slave in enumerate(master.slaves):
            assert (slave.man, slave.id, slave.rev, slave.name) == (0x1337, 0x402, 0x00020001, "Test drive")
            assert slave.state == pysoem.PREOP_STATE or master.read_state() >= pysoem.PREOP_STATE
        io_bytes = master.config_map()
        assert io_bytes == N * (7 + 7)                   # controlword, target, mode out; statusword, actual, mode in
        assert master.expected_wkc == 3 * N              # per slave: output FMMU +2, input FMMU +1
        assert master.state_check(pysoem.SAFEOP_STATE, STATE_TIMEOUT_US) == pysoem.SAFEOP_STATE
        master.state = pysoem.OP_STATE
        master.send_processdata()
        master.receive_processdata(RECEIVE_TIMEOUT_US)
        master.write_state()
        assert master.state_check(pysoem.OP_STATE, STATE_TIMEOUT_US) == pysoem.OP_STATE
        targets = [-250_000, 7, 2**31 - 1]
        wkcs = []
        for cycle in range(20):
            for slave, target in zip(master.slaves, targets):
                slave.output = struct.pack("<Hib", 0x000F, target - cycle, 8)
            master.send_processdata()
            wkcs.append(master.receive_processdata(RECEIVE_TIMEOUT_US))
        assert wkcs[-1] == master.expected_wkc and wkcs.count(master.expected_wkc) >= 18
        # the inputs answer the previous cycle's outputs (the slave's PDI runs after the frame)
        for slave, target in zip(master.slaves, targets):
            assert struct.unpack("<Hib", slave.input) == (0x0237, target - 18, 8)
        master.state = pysoem.INIT_STATE
        master.write_state()
        assert master.state_check(pysoem.INIT_STATE, STATE_TIMEOUT_US) == pysoem.INIT_STATE
    finally:
        master.close()
    stats = stop()
    assert [(s["controlword"], s["target_position"], s["state"]) for s in stats["slaves"]] == [
        (0x000F, t - 19, "INIT") for t in targets]
    assert [s["station"] for s in stats["slaves"]] == [0x1001, 0x1002, 0x1003]   # SOEM's node offset
    assert all(s["outputs_received"] >= 20 for s in stats["slaves"])


def test_refused_transition_names_its_al_status_code(emulated_line):
    ns, stop = emulated_line
    master = open_master(ns)
    try:
        assert master.config_init() == N
        assert master.state_check(pysoem.PREOP_STATE, STATE_TIMEOUT_US) == pysoem.PREOP_STATE
        slave = master.slaves[1]
        slave.state = pysoem.OP_STATE                    # PRE-OP -> OP skips SAFE-OP
        slave.write_state()
        slave.state_check(pysoem.OP_STATE, 200_000)
        master.read_state()
        assert slave.state == pysoem.PREOP_STATE | pysoem.STATE_ERROR
        assert slave.al_status == 0x0011
        assert "invalid requested state change" in pysoem.al_status_code_to_string(slave.al_status).lower()
        assert master.slaves[0].state == pysoem.PREOP_STATE and master.slaves[0].al_status == 0
    finally:
        master.close()
    assert stop()["slaves"][1]["refusals"] == 1


def test_master_gone_the_sm_watchdog_drops_op_to_safeop(emulated_line):
    """The master stops exchanging process data in OP: each slave's SM watchdog (100 ms) takes it to SAFE-OP
    with AL status code 0x001B, as a killed master's slaves do."""
    ns, stop = emulated_line
    master = open_master(ns)
    try:
        master.config_init()
        master.config_map()
        assert master.state_check(pysoem.SAFEOP_STATE, STATE_TIMEOUT_US) == pysoem.SAFEOP_STATE
        master.state = pysoem.OP_STATE
        master.send_processdata()
        master.receive_processdata(RECEIVE_TIMEOUT_US)
        master.write_state()
        assert master.state_check(pysoem.OP_STATE, STATE_TIMEOUT_US) == pysoem.OP_STATE
        silent = time.monotonic()
        deadline = silent + 5.0
        while time.monotonic() < deadline:
            master.read_state()
            if all(s.state == pysoem.SAFEOP_STATE | pysoem.STATE_ERROR for s in master.slaves):
                break
            time.sleep(0.01)
        waited = time.monotonic() - silent
        assert [(s.state, s.al_status) for s in master.slaves] == \
            [(pysoem.SAFEOP_STATE | pysoem.STATE_ERROR, 0x001B)] * N
        assert waited >= 0.1 - 0.01                        # not before the watchdog time (one poll early at most)
    finally:
        master.close()
    assert all(s["watchdog_expiries"] == 1 for s in stop()["slaves"])


def test_raw_frame_round_trip_exact_bytes(emulated_line):
    """A BRD of the type register and an APWR to the second slave, sent by hand: back with ADP advanced by
    each slave, the types OR-ed, the working counters N and 1, and the source address marked by port 0."""
    ns, _ = emulated_line
    with netns.inside(ns):
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETHERTYPE))
    try:
        sock.bind((netns.MASTER_END, ETHERTYPE))
        sock.settimeout(5.0)
        body = build_frame([(C.BRD, 0x11, station(0, 0x0000), 2),
                            (C.APWR, 0x12, station(0xFFFF, 0x0010), b"\x34\x12")])
        source = bytes.fromhex("000000000001")
        sock.send(b"\xff" * 6 + source + struct.pack(">H", ETHERTYPE) + body)
        reply = sock.recv(2048)
    finally:
        sock.close()
    assert reply[:6] == b"\xff" * 6 and reply[6:12] == bytes.fromhex("020000000001")   # bit 1 set
    echoed = bytearray(reply[14:14 + len(body)])
    assert bytes(echoed) == bytes.fromhex(
        "1c10"                                    # 28 bytes of datagrams, type 1
        "07" "11" "0300" "0000" "0280" "0000" "9001" "0300"      # BRD: ADP 0 + 3, type | revision, WKC 3
        "02" "12" "0200" "1000" "0200" "0000" "3412" "0100")     # APWR: ADP 0xFFFF + 3, WKC 1
    assert [d.wkc for d in datagrams(echoed)] == [N, 1]


def test_raw_sdo_upload_through_the_mailbox_exact_bytes(emulated_line):
    """A master's first SDO by hand (ETG.1000.4 mailbox sync managers; ETG.1000.6 5.6 mailbox header, 5.6.2.4
    SDO upload expedited): the second slave given station 0x1002, SM0 / SM1 at the SII's mailbox, PRE-OP; the
    upload request of 0x1018:02 written to SM0 (working counter 1), SM1 read back with the product code."""
    ns, _ = emulated_line
    with netns.inside(ns):
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETHERTYPE))
    request = bytes.fromhex("0a00" "0000" "00" "13" "0020" "40" "1810" "02" "00000000").ljust(128, b"\0")
    frames = [[(C.APWR, 1, station(0xFFFF, 0x0010), b"\x02\x10"),
               (C.FPWR, 2, station(0x1002, 0x0800), bytes.fromhex("0010800026000100" "8010800022000100")),
               (C.FPWR, 3, station(0x1002, 0x0120), b"\x02\x00")],
              [(C.FPWR, 4, station(0x1002, 0x1000), request)],
              [(C.FPRD, 5, station(0x1002, 0x080D), 1), (C.FPRD, 6, station(0x1002, 0x1080), 16)]]
    replies = []
    try:
        sock.bind((netns.MASTER_END, ETHERTYPE))
        sock.settimeout(5.0)
        for parts in frames:
            body = build_frame(parts)
            sock.send(b"\xff" * 6 + bytes(6) + struct.pack(">H", ETHERTYPE) + body)
            replies.append(datagrams(bytearray(sock.recv(2048)[14:14 + len(body)])))
    finally:
        sock.close()
    assert [d.wkc for d in replies[0]] == [1, 1, 1]
    assert replies[1][0].wkc == 1
    status, mailbox = replies[2]
    assert (status.wkc, status.data[0] & 0x08) == (1, 0x08)            # SM1 full
    assert (mailbox.wkc, bytes(mailbox.data)) == (1, bytes.fromhex(
        "0a00" "0000" "00" "13" "0030" "43" "1810" "02" "02040000"))   # CoE SDO response, product code 0x402


def bring_to_safeop(master, slaves: int = N) -> None:
    """config_init finds ``slaves``, config_map, SAFE-OP; one process data exchange, then OP requested."""
    assert master.config_init() == slaves
    master.config_map()
    assert master.state_check(pysoem.SAFEOP_STATE, STATE_TIMEOUT_US) == pysoem.SAFEOP_STATE
    master.state = pysoem.OP_STATE
    master.send_processdata()
    master.receive_processdata(RECEIVE_TIMEOUT_US)
    master.write_state()


def test_fault_a_slave_stuck_in_safeop_with_its_al_status_code(emulator_with):
    ns, _ = emulator_with("--refuse-op", "2", "0x001A")          # 0x001A: synchronization error
    master = open_master(ns)
    try:
        bring_to_safeop(master)
        for _ in range(30):                     # process data kept flowing: no SM watchdog in the others
            master.send_processdata()
            master.receive_processdata(RECEIVE_TIMEOUT_US)
            if master.read_state() == pysoem.SAFEOP_STATE | pysoem.STATE_ERROR and master.slaves[1].state == 8:
                break
            time.sleep(0.005)
        assert [(s.state, s.al_status) for s in master.slaves] == [
            (pysoem.OP_STATE, 0), (pysoem.OP_STATE, 0), (pysoem.SAFEOP_STATE | pysoem.STATE_ERROR, 0x001A)]
    finally:
        master.close()


def test_fault_frames_lost_and_working_counters_wrong(emulator_with):
    """--drop 0.5: about half of the process data frames never come back (pysoem answers -1), the others with
    the expected working counter; a second line with --wkc-offset 1 answers them with one more."""
    ns, stop = emulator_with("--drop", "0.5", "--seed", "3")
    master = open_master(ns)
    try:
        bring_to_safeop(master)
        wkcs = []
        for _ in range(100):
            master.send_processdata()
            wkcs.append(master.receive_processdata(50_000))
    finally:
        master.close()
    lost = wkcs.count(-1)
    assert 20 <= lost <= 80 and wkcs.count(master.expected_wkc) == 100 - lost, wkcs
    # every frame dropped is lost (one more may have been the bring-up's); a late answer is lost too
    assert stop()["dropped"] - 1 <= lost

    ns, _ = emulator_with("--wkc-offset", "1")
    master = open_master(ns)
    try:
        bring_to_safeop(master)
        wkcs = []
        for _ in range(5):
            master.send_processdata()
            wkcs.append(master.receive_processdata(RECEIVE_TIMEOUT_US))
    finally:
        master.close()
    assert wkcs == [3 * N + 1] * 5


def test_the_can_emulators_drive_model_behind_the_ethercat_slaves(emulator_with):
    """``--robot can_arm2``: one slave per joint, each the CAN emulator's CiA 402 drive on the shared plant.
    Through process data alone: the CiA 402 state machine (statusword 0x6041 per CiA 402-2 6.2: switch on
    disabled, ready to switch on, switched on, operation enabled, with bit 9 remote and bit 12 following the
    command in CSP), the mode 8 echoed in 0x6061, the drives powered, making at most their max torque (3 N m at
    the motor)."""
    ns, stop = emulator_with("--robot", "can_arm2")
    master = open_master(ns)
    seen = []
    try:
        bring_to_safeop(master, 2)

        def cycle(controlword, targets, n):
            for _ in range(n):
                for slave, target in zip(master.slaves, targets):
                    slave.output = struct.pack("<Hib", controlword, target, 8)
                master.send_processdata()
                master.receive_processdata(RECEIVE_TIMEOUT_US)
                time.sleep(0.001)
            return [struct.unpack("<Hib", s.input) for s in master.slaves]

        start = [p for _, p, _ in cycle(0x0000, [0, 0], 20)]
        for controlword in (0x0000, 0x0006, 0x0007, 0x000F):
            seen.append([sw & 0x127F for sw, _, _ in cycle(controlword, start, 5)])
        last = cycle(0x000F, start, 100)
    finally:
        master.close()
    assert seen == [[0x0240] * 2, [0x0231] * 2, [0x0233] * 2, [0x1237] * 2]
    assert [mode for _, _, mode in last] == [8, 8]
    for s, target in zip(stop()["slaves"], start):
        assert s["drive_state"] == "OPERATION ENABLED" and s["mode"] == 8 and s["target_position"] == target
        assert 0 < abs(s["torque"]) <= 3.0 + 1e-9         # powered, within the max torque 0x6072


LONG_NAME = "".join(chr(0x41 + k % 26) for k in range(200))


def test_soem_sdo_upload_download_and_abort_codes(emulator_with):
    """SOEM's SDO transfers over the CoE mailbox (ETG.1000.6 5.6.2): the identity 0x1018 expedited, a parameter
    written and read back, a 64-byte string written normal and read back, a 250-byte one written segmented
    (more than a 128-byte mailbox holds) and read back segmented, the 200-byte device name 0x1008 uploaded
    normal then segmented (112 bytes in the initiate response, 88 in a segment), and the abort codes SOEM
    hands up in its SdoError."""
    ns, stop = emulator_with("--name", LONG_NAME)
    master = open_master(ns)
    try:
        assert master.config_init() == N
        slave = master.slaves[1]
        assert struct.unpack("<I", slave.sdo_read(0x1018, 1)) == (0x1337,)
        assert struct.unpack("<I", slave.sdo_read(0x1018, 4)) == (2,)                 # serial number
        slave.sdo_write(0x6065, 0, struct.pack("<I", 54_321))
        assert struct.unpack("<I", slave.sdo_read(0x6065, 0)) == (54_321,)
        assert struct.unpack("<I", master.slaves[0].sdo_read(0x6065, 0)) == (10_000,)  # another slave's own
        text = bytes(range(0x40, 0x80))
        slave.sdo_write(0x2000, 0, text)
        assert slave.sdo_read(0x2000, 0) == text
        long_text = bytes(0x20 + k % 95 for k in range(250))
        slave.sdo_write(0x2000, 0, long_text)
        assert slave.sdo_read(0x2000, 0) == long_text
        assert slave.sdo_read(0x1008, 0) == LONG_NAME.encode()
        for call, code in ((lambda: slave.sdo_write(0x1018, 1, b"\0\0\0\0"), 0x06010002),
                           (lambda: slave.sdo_read(0x5555, 0), 0x06020000),
                           (lambda: slave.sdo_read(0x1018, 9), 0x06090011),
                           (lambda: slave.sdo_write(0x6065, 0, b"\x01\x02"), 0x06070010)):
            with pytest.raises(pysoem.SdoError) as refused:
                call()
            assert refused.value.abort_code == code
    finally:
        master.close()
    sdo = stop()["slaves"][1]["sdo"]
    assert sdo["aborts"] == 4 and sdo["downloads"] == 3


def test_soem_remaps_a_pdo_by_sdo_in_preop(emulated_line):
    """ETG.1000.6 5.6.7: in PRE-OP the assignment 0x1C12:0 set to 0, the RxPDO mapping 0x1600 written by
    complete access without the modes of operation, the assignment restored: SOEM's config_map reads the
    mapping back by SDO and maps 6 output bytes for that slave; in OP the slave's mode stays 0."""
    ns, stop = emulated_line
    master = open_master(ns)
    try:
        assert master.config_init() == N
        slave = master.slaves[0]
        slave.sdo_write(0x1C12, 0, b"\x00")
        slave.sdo_write(0x1600, 0, bytes.fromhex("0200" "10004060" "20007a60"), ca=True)
        slave.sdo_write(0x1C12, 0, b"\x01")
        assert slave.sdo_read(0x1600, 0, ca=True) == bytes.fromhex("0200" "10004060" "20007a60")
        assert master.config_map() == (6 + 7) + (N - 1) * (7 + 7)
        assert [len(s.output) for s in master.slaves] == [6] + [7] * (N - 1)
        assert master.state_check(pysoem.SAFEOP_STATE, STATE_TIMEOUT_US) == pysoem.SAFEOP_STATE
        with pytest.raises(pysoem.SdoError) as refused:
            slave.sdo_write(0x1C12, 0, b"\x00")                  # SAFE-OP: not any more
        assert refused.value.abort_code == 0x08000022
        master.state = pysoem.OP_STATE
        master.send_processdata()
        master.receive_processdata(RECEIVE_TIMEOUT_US)
        master.write_state()
        assert master.state_check(pysoem.OP_STATE, STATE_TIMEOUT_US) == pysoem.OP_STATE
        for _ in range(5):
            slave.output = struct.pack("<Hi", 0x000F, 777)
            for other in master.slaves[1:]:
                other.output = struct.pack("<Hib", 0x000F, 555, 8)
            master.send_processdata()
            assert master.receive_processdata(RECEIVE_TIMEOUT_US) == master.expected_wkc
        assert struct.unpack("<Hib", slave.input) == (0x0237, 777, 0)
        assert struct.unpack("<i", slave.sdo_read(0x607A, 0)) == (777,)      # the object mirrors the PDO
    finally:
        master.close()
    assert [s["mode"] for s in stop()["slaves"]] == [0, 8, 8]


def test_soem_receives_the_drives_emergency(emulator_with):
    """``--robot can_arm2``: a fault requested through 0x2001 (as on the CAN drives) faults the CAN emulator's
    drive model, whose EMCY (CiA 301 7.2.7) reaches SOEM as a CoE emergency (ETG.1000.6 5.6.4) in its
    emergency callback, with the error code and the error register (bit 0 generic, bit 1 current for 0x2310)."""
    ns, stop = emulator_with("--robot", "can_arm2")
    master = open_master(ns)
    seen = []
    try:
        assert master.config_init() == 2
        slave = master.slaves[1]
        slave.add_emergency_callback(lambda emcy: seen.append((emcy.error_code, emcy.error_reg)))
        slave.sdo_write(0x2001, 0, struct.pack("<H", 0x2310))
        assert slave.sdo_read(0x1001, 0) == b"\x03"        # read after the EMCY: SOEM empties SM1 first
    finally:
        master.close()
    assert seen == [(0x2310, 0x03)]
    assert [s["drive_state"] for s in stop()["slaves"]] == ["SWITCH ON DISABLED", "FAULT"]


def test_soem_browses_the_object_dictionary_by_sdo_information(emulated_line):
    """SOEM's OD list, object and entry descriptions (ETG.1000.6 5.6.3) agree with what SDO uploads read: each
    object's name, object code and data type, each entry's bit length and access (0x07 read-only, 0x3F
    read-write, 0x0F written in PRE-OP only; bit 6 / 7 RxPDO / TxPDO mappable)."""
    ns, _ = emulated_line
    master = open_master(ns)
    try:
        assert master.config_init() == N
        slave = master.slaves[2]
        objects = {o.index: o for o in slave.od}
        assert len(objects) == 45 and objects[0x1008].name == b"Manufacturer device name"
        assert (objects[0x1018].object_code, objects[0x1018].data_type) == (0x09, 0x0007)
        identity = [(e.data_type, e.bit_length, e.obj_access) for e in objects[0x1018].entries]
        assert identity == [(0x0005, 8, 0x07)] + [(0x0007, 32, 0x07)] * 4
        assert [slave.sdo_read(0x1018, k) for k in range(1, 5)] == [
            struct.pack("<I", v) for v in (0x1337, 0x402, 0x00020001, 3)]
        assert (objects[0x6041].obj_access, objects[0x6040].obj_access) == (0x87, 0x7F)
        assert [e.obj_access for e in objects[0x1600].entries][:2] == [0x0F, 0x0F]
        assert objects[0x2000].bit_length == 256 * 8
    finally:
        master.close()
