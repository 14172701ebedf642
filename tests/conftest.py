import os
import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(params=["xml-string", "file"])
def load_error(request, tmp_path):
    """Load a malformed URDF from a string or a file; return the ModelError message (for a file, naming it)."""
    from rtctl.model import ModelError
    from rtctl.model.urdf import load_urdf

    def load(urdf: str) -> str:
        if request.param == "xml-string":
            with pytest.raises(ModelError) as info:
                load_urdf(urdf)
            return str(info.value)
        path = tmp_path / "malformed.urdf"
        path.write_text(urdf, encoding="utf-8")
        with pytest.raises(ModelError) as info:
            load_urdf(path)
        assert str(path) in str(info.value)
        return str(info.value)

    return load


def pytest_configure(config):
    """The stop-signal tests send SIGINT, SIGTERM and SIGHUP to this process and to the programs it starts. A
    process started in the background by a shell (``nohup``, ``&``) or a pytest-xdist worker may have inherited
    one of them ignored, and an ignored signal stays ignored across exec in every child: the defaults are
    restored here, as an interactive shell would have them."""
    for sig, handler in ((signal.SIGINT, signal.default_int_handler), (signal.SIGHUP, signal.SIG_DFL),
                         (signal.SIGTERM, signal.SIG_DFL)):
        if signal.getsignal(sig) is signal.SIG_IGN:
            signal.signal(sig, handler)


# Tests whose bounds need the machine to wake a paced loop, and an emulator or server beside it, on time: the HIL
# rigs, the emulated buses and devices, the telemetry and operator channels under load. Two of them side by side
# on 2 cores starve each other (CI: wake-up p99 of tens of ms, 1 kHz EtherCAT beside 500 Hz CAN), so under
# pytest-xdist (``--dist loadgroup``, pyproject.toml) they all run on one worker, one after the other, while the
# other worker takes the rest.
REALTIME_GROUP = "realtime"
REALTIME_FILES = {"test_ethercat_driver.py", "test_ethercat_kickcat.py", "test_ethercat_cst.py", "test_ethercat_dc.py",
                  "test_ethercat_pysoem.py", "test_ethercat_mapping.py", "test_ethercat_modes.py",
                  "test_mip_emulated.py", "test_mujoco_plant.py", "test_operator_process.py", "test_telemetry.py",
                  "test_telemetry_backlog.py"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(str(item.fspath))
        if path.parent.name == "hil" or path.name in REALTIME_FILES:
            item.add_marker(pytest.mark.xdist_group(REALTIME_GROUP))


@pytest.hookimpl(wrapper=True)
def pytest_collection(session):
    """On a cold numba cache, importing the test modules compiles every kernel declared with its signatures
    (minutes on 2 cores). Said as ``rtctl run`` says it (:class:`rtctl.cli.CompileProgress`) rather than
    nothing until collection ends. pytest captures file descriptors 1 and 2 while it imports a test module,
    so the lines go to a copy of stdout's descriptor taken here, outside that capture."""
    from rtctl.cli import CompileProgress

    try:
        stream = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    except (AttributeError, OSError, ValueError):   # a stdout without a descriptor (pytest run in-process)
        return (yield)
    try:
        with CompileProgress(stream):
            return (yield)
    finally:
        stream.close()
