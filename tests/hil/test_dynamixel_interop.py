"""Interop: the official dynamixel_sdk, as a client over the pty, pings, reads and writes our emulated servos."""
import dynamixel_sdk as sdk
import pytest

from rtctl.hil.dynamixel_emulator import EmulatorProcess


@pytest.fixture(scope="module")
def sdk_port():
    with EmulatorProcess("--robot", "dxl_arm2", "--initial", "0.5,-0.25") as emu:
        port = sdk.PortHandler(emu.port)
        assert port.openPort() and port.setBaudRate(57600)
        yield port, sdk.PacketHandler(2.0), emu
        port.closePort()
    assert emu.stats["crc_errors_in"] == 0


@pytest.mark.slow
def test_sdk_pings_the_chain(sdk_port):
    port, ph, _ = sdk_port
    for dxl_id in (1, 2):
        model, result, error = ph.ping(port, dxl_id)
        assert (model, result, error) == (1020, sdk.COMM_SUCCESS, 0)
    model, result, _ = ph.ping(port, 3)                       # no such servo
    assert result == sdk.COMM_RX_TIMEOUT
    found, result = ph.broadcastPing(port)
    assert result == sdk.COMM_SUCCESS and sorted(found) == [1, 2] and found[1][0] == 1020


def test_sdk_reads_quantised_state(sdk_port):
    port, ph, _ = sdk_port
    pos, result, error = ph.read4ByteTxRx(port, 1, 132)
    assert (result, error) == (sdk.COMM_SUCCESS, 0)
    assert pos == round(0.5 / (2 * 3.141592653589793 / 4096)) + 2048      # 2374 counts
    mode, result, _ = ph.read1ByteTxRx(port, 2, 11)
    assert (mode, result) == (3, sdk.COMM_SUCCESS)                         # factory default: position control


def test_sdk_writes_and_reads_back_and_gets_error_bytes(sdk_port):
    port, ph, _ = sdk_port
    assert ph.write1ByteTxRx(port, 1, 11, 0) == (sdk.COMM_SUCCESS, 0)       # current control
    assert ph.write2ByteTxRx(port, 1, 102, 40) == (sdk.COMM_SUCCESS, 0)
    assert ph.read2ByteTxRx(port, 1, 102) == (40, sdk.COMM_SUCCESS, 0)
    assert ph.write1ByteTxRx(port, 1, 64, 1) == (sdk.COMM_SUCCESS, 0)
    result, error = ph.write1ByteTxRx(port, 1, 11, 3)                       # EEPROM while torque is on
    assert result == sdk.COMM_SUCCESS and error == 7                        # access error
    assert ph.write1ByteTxRx(port, 1, 64, 0) == (sdk.COMM_SUCCESS, 0)


def test_sdk_group_sync_read_and_write(sdk_port):
    port, ph, _ = sdk_port
    writer = sdk.GroupSyncWrite(port, ph, 116, 4)
    for dxl_id, goal in ((1, 2100), (2, 1900)):
        assert writer.addParam(dxl_id, list(goal.to_bytes(4, "little")))
    assert writer.txPacket() == sdk.COMM_SUCCESS
    reader = sdk.GroupSyncRead(port, ph, 116, 4)
    for dxl_id in (1, 2):
        reader.addParam(dxl_id)
    assert reader.txRxPacket() == sdk.COMM_SUCCESS
    assert [reader.getData(i, 116, 4) for i in (1, 2)] == [2100, 1900]
