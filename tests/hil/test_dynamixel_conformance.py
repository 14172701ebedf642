"""Conformance of the emulated XM430-W350 firmware, driven by ROBOTIS' own master (dynamixel_sdk's PacketHandler).

One test per behaviour the ROBOTIS e-manual documents; each docstring names its section:
"P2" is the DYNAMIXEL Protocol 2.0 page (emanual.robotis.com/docs/en/dxl/protocol2/), "CT" the XM430-W350
control table (emanual.robotis.com/docs/en/dxl/x/xm430-w350/). One emulator serves the module; after each test
both servos get FACTORY RESET option 0x02 (every item back to its default but ID and baud rate, and a reboot).
"""
import time

import dynamixel_sdk as sdk
import pytest
from rtctl.drivers.dynamixel import protocol as P
from rtctl.hil.dynamixel_emulator import EmulatorProcess

# Items (CT addresses).
OPERATING_MODE, RETURN_DELAY, BAUD, ID, TORQUE, LED, STATUS_RETURN = 11, 9, 8, 7, 64, 65, 68
MAX_VOLTAGE, TEMPERATURE_LIMIT, SHUTDOWN, MAX_POSITION = 32, 31, 63, 48
REGISTERED, HW_ERROR, WATCHDOG = 69, 70, 98
GOAL_CURRENT, GOAL_VELOCITY, GOAL_POSITION, PRESENT_POSITION, MODEL = 102, 104, 116, 132, 0
OK = (sdk.COMM_SUCCESS, 0)


class Bus:
    def __init__(self, port, ph):
        self.port, self.ph = port, ph

    def raw(self, dxl_id, instruction, params=(), wait=True):
        """Send any instruction through the SDK's packet layer; (status packet, result) or (None, result)."""
        pkt = [0] * (10 + len(params))
        pkt[4], pkt[5], pkt[6], pkt[7] = dxl_id, (len(params) + 3) & 0xFF, (len(params) + 3) >> 8, instruction
        pkt[8:8 + len(params)] = list(params)
        result = self.ph.txPacket(self.port, pkt)
        if result != sdk.COMM_SUCCESS or not wait:
            self.port.is_using = False
            return None, result
        self.port.setPacketTimeout(11)
        return self.ph.rxPacket(self.port, False)

    def quiet_write(self, dxl_id, address, value):
        """A 1-byte WRITE whose status packet (if any) is discarded: for writes that change how to reach the
        servo (ID, baud rate, Status Return Level)."""
        self.ph.write1ByteTxOnly(self.port, dxl_id, address, value)
        time.sleep(0.02)
        self.port.clearPort()

    def error_of(self, dxl_id, instruction, params=()):
        rx, result = self.raw(dxl_id, instruction, params)
        assert result == sdk.COMM_SUCCESS and rx[4] == dxl_id, (result, rx)
        return rx[8]


@pytest.fixture(scope="module")
def bus():
    # Joint 1 starts past one revolution (7 rad = 6611 counts) for CLEAR; the gear train holds it with torque off
    # (servo 1's torque stays off in this module: the plant's joint limit would pull it back).
    # The SDK waits 2 x its USB latency timer (16 ms) + 2 ms for a reply: an emulator process preempted longer
    # than that on a busy machine (the suite's other half beside it) read as no reply (-3001). These tests are of
    # what the servo answers, not of how fast: the SDK waits 0.5 s here.
    latency = sdk.port_handler.LATENCY_TIMER
    sdk.port_handler.LATENCY_TIMER = 250
    with EmulatorProcess("--robot", "dxl_arm2", "--initial", "7.0,-0.25") as emu:
        port = sdk.PortHandler(emu.port)
        assert port.openPort() and port.setBaudRate(57600)
        yield Bus(port, sdk.PacketHandler(2.0))
        port.closePort()
    sdk.port_handler.LATENCY_TIMER = latency


@pytest.fixture(autouse=True)
def factory_state(bus):
    yield
    bus.port.setBaudRate(57600)
    for dxl_id in (1, 2):                    # no reply expected: a test may have left Status Return Level 0 or 1
        bus.raw(dxl_id, P.FACTORY_RESET, [0x02], wait=False)
        time.sleep(0.02)
        bus.port.clearPort()                 # its status packet, if any
        assert bus.ph.ping(bus.port, dxl_id) == (1020, *OK)


@pytest.mark.slow
def test_result_fail_control_table_backup_with_torque_on(bus):
    """P2 Control Table Backup (0x20): with Torque Enable 1 the status packet carries Result Fail (0x01)."""
    assert bus.ph.write1ByteTxRx(bus.port, 2, TORQUE, 1) == OK
    assert bus.error_of(2, P.CONTROL_TABLE_BACKUP, [0x01, *P.BACKUP_MAGIC]) == P.ERROR_RESULT_FAIL
    assert bus.ph.write1ByteTxRx(bus.port, 2, TORQUE, 0) == OK
    assert bus.error_of(2, P.CONTROL_TABLE_BACKUP, [0x01, *P.BACKUP_MAGIC]) == 0


def test_instruction_error_for_an_undefined_instruction(bus):
    """P2 Status Packet / Error 0x02: an undefined instruction is an Instruction Error."""
    assert bus.error_of(2, 0x7F) == P.ERROR_INSTRUCTION


def test_instruction_error_for_action_without_reg_write(bus):
    """P2 Status Packet / Error 0x02 and Action (0x05): ACTION with nothing registered is an Instruction Error."""
    assert bus.error_of(1, P.ACTION) == P.ERROR_INSTRUCTION


def test_crc_error_for_a_packet_whose_crc_does_not_match(bus):
    """P2 Status Packet / Error 0x03 (CRC Error): the servo answers a damaged packet with it and does nothing."""
    packet = bytearray(P.write_packet(1, LED, b"\x01"))
    packet[-1] ^= 0xFF
    bus.port.clearPort()
    bus.port.writePort(packet)
    bus.port.setPacketTimeout(11)
    rx, result = bus.ph.rxPacket(bus.port, False)
    assert result == sdk.COMM_SUCCESS and (rx[4], rx[8]) == (1, P.ERROR_CRC)
    assert bus.ph.read1ByteTxRx(bus.port, 1, LED) == (0, *OK)


def test_data_range_error_for_a_value_outside_the_item_range(bus):
    """P2 Status Packet / Error 0x04; CT Operating Mode (11) values 0, 1, 3, 4, 5, 16; CT Status Return Level
    (68) 0~2: other values are refused and the item keeps its value."""
    assert bus.ph.write1ByteTxRx(bus.port, 1, OPERATING_MODE, 2) == (sdk.COMM_SUCCESS, P.ERROR_DATA_RANGE)
    assert bus.ph.write1ByteTxRx(bus.port, 1, STATUS_RETURN, 3) == (sdk.COMM_SUCCESS, P.ERROR_DATA_RANGE)
    assert bus.ph.write1ByteTxRx(bus.port, 2, ID, 253) == (sdk.COMM_SUCCESS, P.ERROR_DATA_RANGE)
    assert bus.ph.read1ByteTxRx(bus.port, 1, OPERATING_MODE) == (3, *OK)


def test_data_limit_error_for_goals_beyond_their_limit_items(bus):
    """P2 Status Packet / Error 0x06 (outside the configured Limit value); CT Goal Position (116): Min~Max Position
    Limit in position control mode; CT Goal Current (102): -Current Limit ~ Current Limit."""
    assert bus.ph.write4ByteTxRx(bus.port, 2, MAX_POSITION, 3000) == OK
    assert bus.ph.write4ByteTxRx(bus.port, 2, GOAL_POSITION, 3001) == (sdk.COMM_SUCCESS, P.ERROR_DATA_LIMIT)
    assert bus.ph.write4ByteTxRx(bus.port, 2, GOAL_POSITION, 3000) == OK
    assert bus.ph.write1ByteTxRx(bus.port, 2, OPERATING_MODE, 0) == OK
    assert bus.ph.write2ByteTxRx(bus.port, 2, GOAL_CURRENT, (-1194) & 0xFFFF) == \
        (sdk.COMM_SUCCESS, P.ERROR_DATA_LIMIT)
    assert bus.ph.write2ByteTxRx(bus.port, 2, GOAL_CURRENT, (-1193) & 0xFFFF) == OK


def test_data_length_error_for_a_write_covering_part_of_an_item(bus):
    """P2 Status Packet / Error 0x05: 2 bytes written to a 4-byte item (Goal Position) are refused."""
    goal, *_ = bus.ph.read4ByteTxRx(bus.port, 2, GOAL_POSITION)
    assert bus.ph.write2ByteTxRx(bus.port, 2, GOAL_POSITION, 100) == (sdk.COMM_SUCCESS, P.ERROR_DATA_LENGTH)
    assert bus.ph.read4ByteTxRx(bus.port, 2, GOAL_POSITION) == (goal, *OK)


def test_access_error_for_forbidden_writes(bus):
    """P2 Status Packet / Error 0x07: writing a read-only item (Present Position), an undefined address (66), or
    the EEPROM area while Torque Enable is 1 (CT: EEPROM data can only be written with torque off)."""
    assert bus.ph.write4ByteTxRx(bus.port, 2, PRESENT_POSITION, 0) == (sdk.COMM_SUCCESS, P.ERROR_ACCESS)
    assert bus.ph.write1ByteTxRx(bus.port, 2, 66, 0) == (sdk.COMM_SUCCESS, P.ERROR_ACCESS)
    assert bus.ph.write1ByteTxRx(bus.port, 2, TORQUE, 1) == OK
    assert bus.ph.write1ByteTxRx(bus.port, 2, RETURN_DELAY, 10) == (sdk.COMM_SUCCESS, P.ERROR_ACCESS)


def test_access_error_for_a_read_beyond_the_control_table(bus):
    """P2 Read (0x02) note: an item outside the control table gives Access Error and no parameters."""
    rx, result = bus.raw(1, P.READ, [0x00, 0x10, 0x04, 0x00])              # address 4096
    assert result == sdk.COMM_SUCCESS and rx[8] == P.ERROR_ACCESS and (rx[5] | rx[6] << 8) == 4


def test_status_return_level_0_answers_ping_only_and_1_adds_reads(bus):
    """CT Status Return Level (68): 0 returns a status packet for PING only, 1 for PING and READ, 2 for all."""
    bus.quiet_write(2, STATUS_RETURN, 0)
    assert bus.ph.ping(bus.port, 2) == (1020, *OK)
    assert bus.ph.read1ByteTxRx(bus.port, 2, LED)[1] == sdk.COMM_RX_TIMEOUT
    assert bus.ph.write1ByteTxRx(bus.port, 2, LED, 1)[0] == sdk.COMM_RX_TIMEOUT
    bus.quiet_write(2, STATUS_RETURN, 1)
    assert bus.ph.read1ByteTxRx(bus.port, 2, LED) == (1, *OK)            # the silent write was executed
    assert bus.ph.write1ByteTxRx(bus.port, 2, LED, 0)[0] == sdk.COMM_RX_TIMEOUT


def test_return_delay_time_delays_every_status_packet(bus):
    """CT Return Delay Time (9): the status packet comes Return Delay Time x 2 us after the instruction packet
    (254 -> 508 us). A lower bound: no round trip can be shorter."""
    assert bus.ph.write1ByteTxRx(bus.port, 1, RETURN_DELAY, 254) == OK
    times = []
    for _ in range(10):
        t0 = time.perf_counter()
        assert bus.ph.ping(bus.port, 1) == (1020, *OK)
        times.append(time.perf_counter() - t0)
    assert min(times) >= 508e-6, times


def test_id_change_takes_effect_at_once(bus):
    """CT ID (7): the servo is addressed by its new ID from the next packet on."""
    bus.quiet_write(1, ID, 9)
    try:
        assert bus.ph.ping(bus.port, 1)[1] == sdk.COMM_RX_TIMEOUT
        assert bus.ph.ping(bus.port, 9) == (1020, *OK)
    finally:
        bus.quiet_write(9, ID, 1)
    assert bus.ph.ping(bus.port, 1) == (1020, *OK)


def test_baud_rate_change_takes_effect_at_once(bus):
    """CT Baud Rate (8): value 3 is 1 Mbps; the servo then only hears a master at that rate."""
    bus.quiet_write(2, BAUD, 3)
    assert bus.ph.ping(bus.port, 2)[1] == sdk.COMM_RX_TIMEOUT
    bus.port.setBaudRate(1_000_000)
    assert bus.ph.ping(bus.port, 2) == (1020, *OK)
    assert bus.ph.ping(bus.port, 1)[1] == sdk.COMM_RX_TIMEOUT             # servo 1 is still at 57600
    bus.quiet_write(2, BAUD, 1)
    bus.port.setBaudRate(57600)
    assert bus.ph.ping(bus.port, 2) == (1020, *OK)


def test_reg_write_waits_for_action(bus):
    """P2 Reg Write (0x04) and Action (0x05); CT Registered Instruction (69): REG WRITE registers (69 = 1) without
    executing; ACTION executes it and clears 69."""
    assert bus.ph.regWriteTxRx(bus.port, 1, LED, 1, [1]) == OK
    assert bus.ph.read1ByteTxRx(bus.port, 1, REGISTERED) == (1, *OK)
    assert bus.ph.read1ByteTxRx(bus.port, 1, LED) == (0, *OK)
    assert bus.error_of(1, P.ACTION) == 0
    assert bus.ph.read1ByteTxRx(bus.port, 1, LED) == (1, *OK)
    assert bus.ph.read1ByteTxRx(bus.port, 1, REGISTERED) == (0, *OK)


def test_factory_reset_options(bus):
    """P2 Factory Reset (0x06): 0x02 resets all but ID and baud rate, 0x01 all but ID, 0xFF everything
    (ID 1); 0xFF sent to the broadcast ID is not executed."""
    assert bus.ph.write1ByteTxRx(bus.port, 2, RETURN_DELAY, 7) == OK
    bus.raw(P.BROADCAST_ID, P.FACTORY_RESET, [0xFF], wait=False)
    assert bus.ph.read1ByteTxRx(bus.port, 2, RETURN_DELAY) == (7, *OK)     # not executed
    bus.quiet_write(2, BAUD, 2)                         # 115200
    bus.port.setBaudRate(115200)
    assert bus.ph.factoryReset(bus.port, 2, 0x02) == OK
    assert bus.ph.read1ByteTxRx(bus.port, 2, RETURN_DELAY) == (250, *OK)   # reset, baud rate kept
    assert bus.ph.factoryReset(bus.port, 2, 0x01) == OK                   # the baud rate goes back to 57600
    bus.port.setBaudRate(57600)
    assert bus.ph.ping(bus.port, 2) == (1020, *OK)
    bus.quiet_write(1, ID, 5)                           # make room for ID 1
    try:
        assert bus.ph.factoryReset(bus.port, 2, 0xFF) == OK
        assert bus.ph.ping(bus.port, 2)[1] == sdk.COMM_RX_TIMEOUT
        assert bus.ph.ping(bus.port, 1) == (1020, *OK)                      # servo 2 is now ID 1
    finally:
        bus.quiet_write(1, ID, 2)
        bus.quiet_write(5, ID, 1)
    assert [bus.ph.ping(bus.port, i)[1] for i in (1, 2)] == [sdk.COMM_SUCCESS] * 2


def test_reboot_resets_ram_and_keeps_eeprom(bus):
    """P2 Reboot (0x08); CT: the RAM area (LED, Torque Enable) restarts at its initial values, the EEPROM area
    (Return Delay Time) keeps what was written."""
    assert bus.ph.write1ByteTxRx(bus.port, 2, RETURN_DELAY, 100) == OK
    assert bus.ph.write1ByteTxRx(bus.port, 2, LED, 1) == OK
    assert bus.ph.write1ByteTxRx(bus.port, 2, TORQUE, 1) == OK
    assert bus.ph.reboot(bus.port, 2) == OK
    assert [bus.ph.read1ByteTxRx(bus.port, 2, a)[0] for a in (LED, TORQUE, RETURN_DELAY)] == [0, 0, 100]


def test_clear_resets_multi_turn_position_only_when_stopped(bus):
    """P2 Clear (0x10): parameters 01 44 58 4C 22 reset Present Position to within one revolution (0~4095);
    while the servo moves the status packet carries Result Fail."""
    present, *_ = bus.ph.read4ByteTxRx(bus.port, 1, PRESENT_POSITION)
    assert present >= 4096 or present < 0, present
    assert bus.ph.clearMultiTurn(bus.port, 1) == OK
    assert bus.ph.read4ByteTxRx(bus.port, 1, PRESENT_POSITION) == (present % 4096, *OK)
    assert bus.ph.write1ByteTxRx(bus.port, 2, OPERATING_MODE, 1) == OK      # velocity control
    assert bus.ph.write1ByteTxRx(bus.port, 2, TORQUE, 1) == OK
    assert bus.ph.write4ByteTxRx(bus.port, 2, GOAL_VELOCITY, 100) == OK
    time.sleep(0.2)
    assert bus.ph.clearMultiTurn(bus.port, 2) == (sdk.COMM_SUCCESS, P.ERROR_RESULT_FAIL)


def test_control_table_backup_stores_and_restores_eeprom(bus):
    """P2 Control Table Backup (0x20): option 0x01 stores the control table, 0x02 restores the EEPROM data from
    the backup (then reboots)."""
    assert bus.ph.write1ByteTxRx(bus.port, 2, RETURN_DELAY, 100) == OK
    assert bus.error_of(2, P.CONTROL_TABLE_BACKUP, [0x01, *P.BACKUP_MAGIC]) == 0
    assert bus.ph.write1ByteTxRx(bus.port, 2, RETURN_DELAY, 200) == OK
    assert bus.error_of(2, P.CONTROL_TABLE_BACKUP, [0x02, *P.BACKUP_MAGIC]) == 0
    assert bus.ph.read1ByteTxRx(bus.port, 2, RETURN_DELAY) == (100, *OK)


def test_bulk_write_and_bulk_read_address_each_servo_separately(bus):
    """P2 Bulk Write (0x93) and Bulk Read (0x92): a different address and length per servo, one status packet
    per servo in the order of the request."""
    writer = sdk.GroupBulkWrite(bus.port, bus.ph)
    assert writer.addParam(1, LED, 1, [1]) and writer.addParam(2, RETURN_DELAY, 1, [42])
    assert writer.txPacket() == sdk.COMM_SUCCESS
    reader = sdk.GroupBulkRead(bus.port, bus.ph)
    assert reader.addParam(1, LED, 1) and reader.addParam(2, RETURN_DELAY, 1)
    assert reader.txRxPacket() == sdk.COMM_SUCCESS
    assert (reader.getData(1, LED, 1), reader.getData(2, RETURN_DELAY, 1)) == (1, 42)


def test_fast_sync_read_returns_one_packet_for_all_servos(bus):
    """P2 Fast Sync Read (0x8A): one status packet from the broadcast ID with each servo's error, ID, data and
    CRC, read by the SDK's GroupSyncRead.fastSyncRead."""
    expected = [bus.ph.read4ByteTxRx(bus.port, i, PRESENT_POSITION)[0] for i in (1, 2)]
    reader = sdk.GroupSyncRead(bus.port, bus.ph, PRESENT_POSITION, 4)
    assert reader.addParam(1) and reader.addParam(2)
    assert reader.fastSyncRead() == sdk.COMM_SUCCESS
    assert [reader.getData(i, PRESENT_POSITION, 4) for i in (1, 2)] == expected


def test_fast_bulk_read_returns_one_packet_for_all_servos(bus):
    """P2 Fast Bulk Read (0x9A): as Fast Sync Read, with an address and length per servo."""
    assert bus.ph.write1ByteTxRx(bus.port, 2, RETURN_DELAY, 33) == OK
    reader = sdk.GroupBulkRead(bus.port, bus.ph)
    assert reader.addParam(1, MODEL, 2) and reader.addParam(2, RETURN_DELAY, 1)
    assert reader.fastBulkRead() == sdk.COMM_SUCCESS
    assert (reader.getData(1, MODEL, 2), reader.getData(2, RETURN_DELAY, 1)) == (1020, 33)


def test_bus_watchdog_expiry_stops_the_servo_and_refuses_goals_until_cleared(bus):
    """CT Bus Watchdog (98): with torque on, no instruction packet for longer than value x 20 ms stops the servo;
    the item reads -1 and a goal write gets Data Range Error until 0 is written."""
    assert bus.ph.write1ByteTxRx(bus.port, 2, TORQUE, 1) == OK
    assert bus.ph.write1ByteTxRx(bus.port, 2, WATCHDOG, 5) == OK            # 100 ms
    time.sleep(0.4)
    assert bus.ph.read1ByteTxRx(bus.port, 2, WATCHDOG) == (0xFF, *OK)       # -1
    goal, *_ = bus.ph.read4ByteTxRx(bus.port, 2, GOAL_POSITION)
    assert bus.ph.write4ByteTxRx(bus.port, 2, GOAL_POSITION, goal + 10) == (sdk.COMM_SUCCESS, P.ERROR_DATA_RANGE)
    assert bus.ph.write1ByteTxRx(bus.port, 2, WATCHDOG, 5) == (sdk.COMM_SUCCESS, P.ERROR_DATA_RANGE)
    assert bus.ph.write1ByteTxRx(bus.port, 2, WATCHDOG, 0) == OK
    assert bus.ph.write4ByteTxRx(bus.port, 2, GOAL_POSITION, goal + 10) == OK


def test_bus_watchdog_only_watches_with_torque_on(bus):
    """CT Bus Watchdog (98): the interval is monitored only while Torque Enable is 1."""
    assert bus.ph.write1ByteTxRx(bus.port, 1, WATCHDOG, 1) == OK            # 20 ms
    time.sleep(0.2)
    assert bus.ph.read1ByteTxRx(bus.port, 1, WATCHDOG) == (1, *OK)


def test_overheating_shuts_down_and_latches_until_reboot(bus):
    """CT Shutdown (63) / Hardware Error Status (70): an overheating error (temperature above Temperature Limit,
    bit 2 in the default Shutdown 52) clears Torque Enable, sets the Alert bit of every status packet, and
    only REBOOT lets torque on again."""
    assert bus.ph.write1ByteTxRx(bus.port, 2, TORQUE, 1) == OK
    assert bus.ph.write1ByteTxRx(bus.port, 2, TORQUE, 0) == OK
    assert bus.ph.write1ByteTxRx(bus.port, 2, TEMPERATURE_LIMIT, 25) == OK  # the servo measures 30 C
    time.sleep(0.05)
    assert bus.ph.read1ByteTxRx(bus.port, 2, HW_ERROR) == (P.HW_OVERHEATING, sdk.COMM_SUCCESS, P.ERROR_ALERT)
    assert bus.ph.write1ByteTxRx(bus.port, 2, TEMPERATURE_LIMIT, 80) == (sdk.COMM_SUCCESS, P.ERROR_ALERT)
    assert bus.ph.write1ByteTxRx(bus.port, 2, TORQUE, 1) == \
        (sdk.COMM_SUCCESS, P.ERROR_ALERT | P.ERROR_RESULT_FAIL)
    assert bus.ph.read1ByteTxRx(bus.port, 2, HW_ERROR)[0] == P.HW_OVERHEATING   # latched: the cause is gone
    assert bus.ph.reboot(bus.port, 2) == (sdk.COMM_SUCCESS, P.ERROR_ALERT)
    assert bus.ph.read1ByteTxRx(bus.port, 2, HW_ERROR) == (0, *OK)
    assert bus.ph.write1ByteTxRx(bus.port, 2, TORQUE, 1) == OK


def test_input_voltage_error_is_detected_only_when_shutdown_selects_it(bus):
    """CT Shutdown (63): only the conditions whose bit is set are detected; Input Voltage Error (bit 0, not in
    the default 52) when the input voltage (12.0 V) is above Max Voltage Limit (32)."""
    assert bus.ph.write2ByteTxRx(bus.port, 2, MAX_VOLTAGE, 110) == OK       # 11.0 V
    time.sleep(0.05)
    assert bus.ph.read1ByteTxRx(bus.port, 2, HW_ERROR) == (0, *OK)
    assert bus.ph.write1ByteTxRx(bus.port, 2, SHUTDOWN, 52 | P.HW_INPUT_VOLTAGE) == OK
    time.sleep(0.05)
    assert bus.ph.read1ByteTxRx(bus.port, 2, HW_ERROR) == \
        (P.HW_INPUT_VOLTAGE, sdk.COMM_SUCCESS, P.ERROR_ALERT)


# -- Indirect Address / Indirect Data (CT 168-251 and 578-661) ------------------------------------------------
INDIRECT_ADDRESS_1, INDIRECT_DATA_1, INDIRECT_ADDRESS_29, INDIRECT_DATA_29 = 168, 224, 578, 634
PRESENT_CURRENT, PRESENT_TEMPERATURE = 126, 146


def point(bus, dxl_id, first_address_item, targets):
    """Indirect Address items from ``first_address_item`` on: one per byte of ``targets`` (item address, size)."""
    addresses = [a + k for a, size in targets for k in range(size)]
    for k, target in enumerate(addresses):
        assert bus.ph.write2ByteTxRx(bus.port, dxl_id, first_address_item + 2 * k, target) == OK, (k, target)


def test_indirect_address_defaults_and_range(bus):
    """CT Indirect Address 1-28 (168-223) and 29-56 (578-633), 2 bytes each, initial values 224-251 and 634-661
    (their own Indirect Data); Indirect Address Range 64 ~ 661 ("EEPROM addresses can't be assigned"): 63 and 662
    are a Data Range Error and the item keeps its value."""
    for address, default in ((168, 224), (170, 225), (222, 251), (578, 634), (580, 635), (632, 661)):
        assert bus.ph.read2ByteTxRx(bus.port, 2, address) == (default, *OK), address
    for bad in (63, 662, 0):
        assert bus.ph.write2ByteTxRx(bus.port, 2, INDIRECT_ADDRESS_1, bad) == (sdk.COMM_SUCCESS, P.ERROR_DATA_RANGE)
    assert bus.ph.read2ByteTxRx(bus.port, 2, INDIRECT_ADDRESS_1) == (224, *OK)
    for good in (64, 661):
        assert bus.ph.write2ByteTxRx(bus.port, 2, INDIRECT_ADDRESS_1, good) == OK
        assert bus.ph.read2ByteTxRx(bus.port, 2, INDIRECT_ADDRESS_1) == (good, *OK)


def test_indirect_data_is_the_item_its_address_names(bus):
    """CT Indirect Data, Examples 1 and 2: Indirect Address 1 (168) = 65 makes Indirect Data 1 (224) the LED
    (writing 1/0 there turns the LED on/off, a direct write shows there); Indirect Address 2-5 = 116-119 make
    Indirect Data 2-5 (225-228) Goal Position: 1024 written there is Goal Position 1024."""
    point(bus, 2, INDIRECT_ADDRESS_1, [(LED, 1), (GOAL_POSITION, 4)])
    for value in (1, 0):
        assert bus.ph.write1ByteTxRx(bus.port, 2, INDIRECT_DATA_1, value) == OK
        assert bus.ph.read1ByteTxRx(bus.port, 2, LED) == (value, *OK)
    assert bus.ph.write1ByteTxRx(bus.port, 2, LED, 1) == OK
    assert bus.ph.read1ByteTxRx(bus.port, 2, INDIRECT_DATA_1) == (1, *OK)
    assert bus.ph.write4ByteTxRx(bus.port, 2, INDIRECT_DATA_1 + 1, 1024) == OK
    assert bus.ph.read4ByteTxRx(bus.port, 2, GOAL_POSITION) == (1024, *OK)
    assert bus.ph.read4ByteTxRx(bus.port, 2, INDIRECT_DATA_1 + 1) == (1024, *OK)


def test_indirect_data_inherits_access_range_size_and_limit(bus):
    """CT Indirect Data: the Indirect Data "inherits all the features and properties" of the item it is assigned --
    access (Present Position is read-only: Access Error), value range (LED 0~1: Data Range Error), size (two of
    Goal Position's four bytes: Data Length Error, as P2 for a write covering part of an item) and its limit items
    (Goal Position above Max Position Limit: Data Limit Error). A refused write changes nothing."""
    point(bus, 2, INDIRECT_ADDRESS_1, [(PRESENT_POSITION, 4), (LED, 1), (GOAL_POSITION, 4)])
    goal, *_ = bus.ph.read4ByteTxRx(bus.port, 2, GOAL_POSITION)
    assert bus.ph.write4ByteTxRx(bus.port, 2, 224, 100) == (sdk.COMM_SUCCESS, P.ERROR_ACCESS)
    assert bus.ph.write1ByteTxRx(bus.port, 2, 228, 2) == (sdk.COMM_SUCCESS, P.ERROR_DATA_RANGE)
    assert bus.ph.write2ByteTxRx(bus.port, 2, 229, 100) == (sdk.COMM_SUCCESS, P.ERROR_DATA_LENGTH)
    assert bus.ph.write4ByteTxRx(bus.port, 2, 229, 4096) == (sdk.COMM_SUCCESS, P.ERROR_DATA_LIMIT)
    assert bus.ph.read1ByteTxRx(bus.port, 2, LED) == (0, *OK)
    assert bus.ph.read4ByteTxRx(bus.port, 2, GOAL_POSITION) == (goal, *OK)
    assert bus.ph.read4ByteTxRx(bus.port, 2, 224) == bus.ph.read4ByteTxRx(bus.port, 2, PRESENT_POSITION)


def test_indirect_address_is_locked_while_torque_is_on(bus):
    """CT Indirect Address with ROBOTIS' indirect-address example (DynamixelSDK: "Indirect address would not
    accessible when the torque is already enabled"): with Torque Enable 1 writing an Indirect Address is an
    Access Error, as the EEPROM area; Indirect Data stays writable (that is what it is for)."""
    point(bus, 2, INDIRECT_ADDRESS_1, [(LED, 1)])
    assert bus.ph.write1ByteTxRx(bus.port, 2, TORQUE, 1) == OK
    assert bus.ph.write2ByteTxRx(bus.port, 2, INDIRECT_ADDRESS_1, 116) == (sdk.COMM_SUCCESS, P.ERROR_ACCESS)
    assert bus.ph.write1ByteTxRx(bus.port, 2, INDIRECT_DATA_1, 1) == OK
    assert bus.ph.read1ByteTxRx(bus.port, 2, LED) == (1, *OK)
    assert bus.ph.write1ByteTxRx(bus.port, 2, TORQUE, 0) == OK
    assert bus.ph.write2ByteTxRx(bus.port, 2, INDIRECT_ADDRESS_1, 116) == OK


def test_sync_read_and_write_of_scattered_items_through_indirect_data(bus):
    """CT Indirect Address / Indirect Data ("map multiple control table items needed for their application to
    sequential memory addresses to improve Instruction Packet efficiency") with P2 Sync Read (0x82), Fast Sync Read
    (0x8A) and Sync Write (0x83): Present Position, Present Current, Hardware Error Status and Present Temperature
    gathered at Indirect Data 29-36 (634-641) come back in one GroupSyncRead, byte for byte what direct reads give;
    Goal Position and LED gathered at Indirect Data 1-5 are written to both servos by one GroupSyncWrite. REBOOT
    puts the Indirect Addresses back to their initial values (RAM area, CT)."""
    gathered = [(PRESENT_POSITION, 4), (PRESENT_CURRENT, 2), (HW_ERROR, 1), (PRESENT_TEMPERATURE, 1)]
    for dxl_id in (1, 2):
        point(bus, dxl_id, INDIRECT_ADDRESS_29, gathered)
        point(bus, dxl_id, INDIRECT_ADDRESS_1, [(GOAL_POSITION, 4), (LED, 1)])
    direct = {i: b"".join(bytes(bus.ph.readTxRx(bus.port, i, a, n)[0]) for a, n in gathered) for i in (1, 2)}
    for read in ("txRxPacket", "fastSyncRead"):
        reader = sdk.GroupSyncRead(bus.port, bus.ph, INDIRECT_DATA_29, 8)
        assert reader.addParam(1) and reader.addParam(2)
        assert getattr(reader, read)() == sdk.COMM_SUCCESS, read
        for i in (1, 2):
            got = b"".join(reader.getData(i, INDIRECT_DATA_29 + k, 1).to_bytes(1, "little") for k in range(8))
            assert got == direct[i], (read, i, got, direct[i])
    writer = sdk.GroupSyncWrite(bus.port, bus.ph, INDIRECT_DATA_1, 5)
    for dxl_id, goal in ((1, 1500), (2, 2500)):
        assert writer.addParam(dxl_id, list(goal.to_bytes(4, "little")) + [1])
    assert writer.txPacket() == sdk.COMM_SUCCESS
    assert [bus.ph.read4ByteTxRx(bus.port, i, GOAL_POSITION)[0] for i in (1, 2)] == [1500, 2500]
    assert [bus.ph.read1ByteTxRx(bus.port, i, LED)[0] for i in (1, 2)] == [1, 1]
    assert bus.ph.reboot(bus.port, 2) == OK
    assert bus.ph.read2ByteTxRx(bus.port, 2, INDIRECT_ADDRESS_29) == (634, *OK)
    assert bus.ph.read2ByteTxRx(bus.port, 2, INDIRECT_ADDRESS_1) == (224, *OK)
