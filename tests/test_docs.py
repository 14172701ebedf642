"""The documentation site: mkdocs builds it with --strict (a broken link or anchor fails the build), and its
configuration reference, generated from the schemas the code validates configs with (rtctl.reference, through
mkdocs_hooks.py), lists every key of every core section, every component and every section a component owns,
with the comment written beside the key's declaration. The commands the pages show run in tests/test_readme.py."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rtctl import reference
from rtctl.config import COMPONENTS, CORE_SCHEMA, collision_keys
from rtctl.options import schema_keys
from rtctl.registry import ESTIMATORS, SENSORS

ROOT = Path(__file__).resolve().parents[1]
SITE_SOURCES = ("mkdocs.yml", "mkdocs_hooks.py", "README.md", "docs", "benchmarks/RESULTS.md")

pytestmark = pytest.mark.skipif(not (ROOT / "mkdocs.yml").is_file(), reason="needs the source tree's docs")


def build(root: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(root / "mkdocs.yml"),
                           "-d", str(site)], capture_output=True, text=True, timeout=300)


def tables(markdown: str) -> dict[str, list[str]]:
    """``{heading: [the keys of its table, in order]}`` of the reference page."""
    out, heading = {}, None
    for line in markdown.splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
            out[heading] = []
        elif m := re.match(r"\| `(\w+)` \|", line):
            out[heading].append(m.group(1))
    return out


def expected_tables() -> dict[str, list[str]]:
    """The same, from the schemas themselves."""
    out = {f"`[{section}]`": list(keys) for section, keys in CORE_SCHEMA.items()}
    for section, (registry, selector, _) in COMPONENTS.items():
        for name, cls in registry.all().items():
            out[f'`{selector} = "{name}"`'] = list(schema_keys(cls.Options))
            for owned, options in getattr(cls, "sections", {}).items():
                out[f"`[{owned}]`"] = list(schema_keys(options))
    for name, cls in SENSORS.all().items():
        out[f'`[[sensors]] backend = "{name}"`'] = list(schema_keys(cls.Options))
    for name, cls in ESTIMATORS.all().items():
        out[f'`[estimator] type = "{name}"`'] = list(schema_keys(cls.Options))
    out["`[collision]`"] = list(collision_keys())
    return out


@pytest.mark.slow
def test_the_site_builds_strictly_with_the_generated_pages(tmp_path):
    """The real site builds with --strict; its configuration page has one table row per key of the generated
    reference (and one header per table), and its home page is the README."""
    result = build(ROOT, tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    page = (tmp_path / "site" / "configuration" / "index.html").read_text()
    keys = sum(len(v) for v in tables(reference.markdown()).values())
    headers = reference.markdown().count("| key | type | default | allowed | notes |")
    theme = (tmp_path / "site" / "dynamics" / "index.html").read_text().count("<tr>")   # a page without tables
    assert page.count("<tr>") - theme == keys + headers
    home = (tmp_path / "site" / "index.html").read_text()
    assert "Your robot's URDF in five minutes" in home and 'href="configuration/"' in home


@pytest.mark.slow
def test_a_broken_link_fails_the_build(tmp_path):
    """The same sources with one link to a page that does not exist: --strict refuses them, naming the link."""
    for name in SITE_SOURCES:
        source, target = ROOT / name, tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if source.is_dir() else shutil.copy)(source, target)
    page = tmp_path / "docs" / "running.md"
    page.write_text(page.read_text() + "\nSee [the missing page](missing.md).\n")
    result = build(tmp_path, tmp_path / "site")
    assert result.returncode != 0
    assert "missing.md" in result.stdout + result.stderr


def test_the_reference_lists_every_key_of_every_section_and_component():
    generated = tables(reference.markdown())
    for heading, keys in expected_tables().items():
        assert generated.get(heading) == keys, f"reference: {heading}: {generated.get(heading)} != {keys}"


def test_the_notes_are_the_comments_beside_each_declaration(tmp_path, monkeypatch):
    """A key's note is the comment on its declaration's lines (a call over several lines included), after the
    comment lines directly above it; a key without one has none; a subclass's comment wins."""
    (tmp_path / "commented_options.py").write_text(textwrap.dedent('''
        from dataclasses import dataclass
        from rtctl.options import setting

        @dataclass(frozen=True)
        class Base:
            gain: float = setting("float", 1.0)   # 1/s, the base's
            plain: int = setting("int", 2)

        @dataclass(frozen=True)
        class Options(Base):
            # the bound
            # in two lines
            limit: float = setting("float", 3.0,
                                   low=0.0)          # N m
            gain: float = setting("float", 5.0)     # 1/s, the subclass's
        '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = __import__("commented_options")
    assert reference.field_comments(module.Options) == {
        "gain": "1/s, the subclass's", "plain": "", "limit": "the bound in two lines N m"}
    rows = reference.key_table(schema_keys(module.Options), reference.field_comments(module.Options))
    assert "| `limit` | float | `3.0` | >= 0 | the bound in two lines N m |" in rows.splitlines()


def test_the_core_sections_notes_come_from_the_config_module():
    """Each CORE_SCHEMA key with a comment in rtctl/config.py has that comment as its note."""
    import inspect

    from rtctl import config

    notes = reference.core_comments()
    source = inspect.getsource(config)
    commented = re.findall(r'^\s+"(\w+)": Key\(.*?\)\s*,\s*#\s*(.+)$', source, re.M)
    assert len(commented) > 10
    found = {(key, note.strip()) for key, note in commented}
    listed = {(key, text) for _, keys in notes.values() for key, text in keys.items() if text}
    assert found <= listed


@pytest.mark.slow
def test_the_readme_is_the_front_door_and_keeps_the_commands_ci_runs():
    """At most 250 lines; its Set-up block holds the two commands as written (.ci/run runs the second's
    pytest); `python -m rtctl.reference` prints the generated reference page."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    setup = readme[readme.index("## Set-up"):]
    block = setup[setup.index("```bash\n") + 8:setup.index("```", setup.index("```bash\n") + 8)]
    commands = [line for line in block.splitlines() if line and not line.startswith("#")]
    assert commands == ['python3 -m venv .venv && . .venv/bin/activate && pip install . && rtctl demo',
                        'python3 -m venv .venv && . .venv/bin/activate && pip install ".[test]" && python -m pytest -q -n 2']
    assert "\npython -m pytest -q -n 2\n" in (ROOT / ".ci" / "run").read_text()
    printed = subprocess.run([sys.executable, "-m", "rtctl.reference"], capture_output=True, text=True, timeout=120)
    assert printed.returncode == 0 and printed.stdout == reference.markdown() + "\n"
