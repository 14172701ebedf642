"""``package://PACKAGE/PATH`` model files (rtctl.model.package_file): a file inside an installed Python package,
found where the import system would find the package and never imported.

The packages here are made in a temporary folder on sys.path; their ``__init__`` raises, so a resolution that
imported one would fail. A regular package, a namespace package over two folders, a module, a path out of the
package (``..``, absolute, a symbolic link leading out) and a package that is not installed; then the same
through a run config's ``[robot] model`` and ``[plant] model`` (one line naming the file, the key, the package
and what to install), and a bounded fuzz of the URL's text.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rtctl.config import ConfigError, build, load_config
from rtctl.model.package_file import package_file
from rtctl.options import show

EXPLODES = "raise RuntimeError('imported')\n"
URDF = (Path(__file__).resolve().parents[1] / "rtctl" / "data" / "models" / "arm7.urdf").read_text()


@pytest.fixture
def packages(tmp_path, monkeypatch):
    """``site``: rtpkg_robots (a package holding models/arm.urdf), rtpkg_space (a namespace package over two
    folders), rtpkg_module.py (a module); a file secret.urdf beside the packages and a link to it inside one."""
    site, other = tmp_path / "site", tmp_path / "other"
    (site / "rtpkg_robots" / "models").mkdir(parents=True)
    (site / "rtpkg_robots" / "__init__.py").write_text(EXPLODES)
    (site / "rtpkg_robots" / "models" / "arm.urdf").write_text(URDF)
    (site / "rtpkg_space" / "a").mkdir(parents=True)
    (other / "rtpkg_space" / "b").mkdir(parents=True)
    (site / "rtpkg_space" / "a" / "one.urdf").write_text(URDF)
    (other / "rtpkg_space" / "b" / "two.urdf").write_text(URDF)
    (site / "rtpkg_module.py").write_text(EXPLODES)
    (site / "secret.urdf").write_text(URDF)
    (site / "rtpkg_robots" / "models" / "leak.urdf").symlink_to(site / "secret.urdf")
    monkeypatch.syspath_prepend(str(other))
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    yield site, other
    for name in ("rtpkg_robots", "rtpkg_space", "rtpkg_module"):
        sys.modules.pop(name, None)
    importlib.invalidate_caches()


def test_a_file_of_a_package_is_found_without_importing_it(packages):
    site, other = packages
    assert package_file("package://rtpkg_robots/models/arm.urdf") == site / "rtpkg_robots" / "models" / "arm.urdf"
    assert package_file("package://rtpkg_robots/./models//arm.urdf") == site / "rtpkg_robots" / "models" / "arm.urdf"
    assert package_file("package://rtpkg_space/a/one.urdf") == site / "rtpkg_space" / "a" / "one.urdf"
    assert package_file("package://rtpkg_space/b/two.urdf") == other / "rtpkg_space" / "b" / "two.urdf"
    assert "rtpkg_robots" not in sys.modules and "rtpkg_space" not in sys.modules


@pytest.mark.parametrize("url, error, said", [
    ("package://rtpkg_missing/models/arm.urdf", FileNotFoundError,
     "no Python package 'rtpkg_missing' is installed; install the distribution that ships it (often "
     "`pip install rtpkg-missing`)"),
    ("package://rtpkg_robots/models/arms.urdf", FileNotFoundError,
     "no file 'models/arms.urdf' in the installed package 'rtpkg_robots' (no distribution names it) (did you mean "
     "'arm.urdf', 'leak.urdf'?); install a version of it that ships the file, or correct the path"),
    ("package://rtpkg_robots/models", FileNotFoundError, "no file 'models' in the installed package"),
    ("package://rtpkg_module/x.urdf", FileNotFoundError, "'rtpkg_module' is a module ("),
    ("package://rtpkg_robots/../secret.urdf", ValueError,
     "the path must stay inside the package 'rtpkg_robots': no '..', not absolute"),
    ("package://rtpkg_robots/models/../../secret.urdf", ValueError, "no '..'"),
    ("package://rtpkg_robots//etc/passwd", ValueError, "not absolute"),
    ("package://rtpkg_robots/models/leak.urdf", ValueError,
     "'models/leak.urdf' is a link leading out of the package 'rtpkg_robots'"),
    ("package://rtpkg_robots", ValueError, "name a file inside the package after its name"),
    ("package://rtpkg_robots/", ValueError, "name a file inside the package after its name"),
    ("package://os.path/x.urdf", ValueError, "'os.path' is not a Python package's name"),
    ("package:///x.urdf", ValueError, "'' is not a Python package's name"),
])
def test_what_cannot_be_resolved_is_one_line_and_nothing_is_imported(packages, url, error, said):
    with pytest.raises(error) as refused:
        package_file(url)
    message = str(refused.value)
    assert message.startswith(f"{url!r}: ") and said in message and "\n" not in message, message
    assert "rtpkg_robots" not in sys.modules and "rtpkg_module" not in sys.modules


def config(tmp_path, robot: str, plant: str | None = None) -> Path:
    path = tmp_path / "robot.toml"
    plant_table = "" if plant is None else f'[plant]\ntype = "mujoco"\nmodel = "{plant}"\n'
    path.write_text(f'[robot]\nmodel = "{robot}"\n{plant_table}[controller]\ntype = "computed_torque"\n'
                    f'[trajectory]\ngoal = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]\nduration = 1.0\n')
    return path


def test_a_run_config_names_its_robot_inside_a_package(packages, tmp_path):
    loop = build(load_config(config(tmp_path, "package://rtpkg_robots/models/arm.urdf")))
    assert loop.model.nv == 7 and "rtpkg_robots" not in sys.modules


@pytest.mark.parametrize("robot, plant, said", [
    ("package://rtpkg_missing/arm.urdf", None,
     "robot.toml: [robot] model: 'package://rtpkg_missing/arm.urdf': no Python package 'rtpkg_missing' is "
     "installed; install the distribution that ships it"),
    ("package://rtpkg_robots/../secret.urdf", None,
     "robot.toml: [robot] model: 'package://rtpkg_robots/../secret.urdf': the path must stay inside the package"),
    ("arm7", "package://rtpkg_missing/arm.xml",
     "robot.toml: [plant] model: 'package://rtpkg_missing/arm.xml': no Python package 'rtpkg_missing' "
     "is installed; install the distribution that ships it"),
    ("arm7", "package://rtpkg_robots/models/../../secret.urdf",
     "robot.toml: [plant] model: 'package://rtpkg_robots/models/../../secret.urdf': the path must stay"),
])
def test_a_config_naming_what_is_not_there_is_one_line_naming_file_key_and_package(packages, tmp_path, robot, plant,
                                                                                   said):
    if plant is not None:
        pytest.importorskip("mujoco", reason="the mujoco extra (rtctl[mujoco]) is not installed")
    with pytest.raises(ConfigError) as refused:
        build(load_config(config(tmp_path, robot, plant)))
    message = str(refused.value)
    assert message.startswith(f"{tmp_path}/{said}") and "\n" not in message, message


_segment = st.one_of(st.sampled_from(["..", ".", "", "models", "arm.urdf", "a", "b", "one.urdf", "leak.urdf",
                                      "/etc/passwd", "x" * 300]),
                     st.text(max_size=20))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(package=st.one_of(st.sampled_from(["rtpkg_robots", "rtpkg_space", "rtpkg_module", "rtpkg_missing", "os",
                                          "", "a.b", ".."]), st.text(max_size=12)),
       segments=st.lists(_segment, max_size=6))
def test_any_url_gives_a_file_inside_the_package_or_one_line(packages, package, segments):
    """Whatever follows ``package://``: a file that is inside one of the package's folders (after resolving
    links), or ValueError / FileNotFoundError in one line starting with the URL; never another exception."""
    url = "package://" + package + "/" + "/".join(segments)
    try:
        path = package_file(url)
    except (ValueError, FileNotFoundError) as exc:
        message = str(exc)
        assert "\n" not in message and message.startswith(show(url) + ": "), message
        return
    roots = [Path(p).resolve() for p in importlib.util.find_spec(package).submodule_search_locations]
    assert path.is_file() and any(path.resolve().is_relative_to(root) for root in roots), (url, path)
