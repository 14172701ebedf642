"""The configuration reference, generated from the schemas the code validates with.

Every key of every run-config section as one Markdown page: the core sections (:data:`rtctl.config.CORE_SCHEMA`),
each component section with one table per component that may be selected there (its ``Options`` dataclass,
found by name in :mod:`rtctl.registry`, third-party packages included), the sections a component owns (its
``sections``) and ``[collision]``. For each key: its type, default, bounds or choices, and the comment written
beside its declaration in the source, so that the reference cannot drift from what a config is checked
against. The docs site builds its configuration page from :func:`markdown` (the mkdocs hook at the repository
root).
"""
from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import re
import textwrap
import tokenize

from . import config
from .options import Key, schema_keys

KINDS = {"float": "float", "int": "int", "bool": "bool", "str": "string", "floats": "float or list of floats",
         "ints": "int or list of ints", "strs": "list of strings", "matrix": "matrix (list of lists)"}


def _comments(source: str) -> tuple[dict[int, str], set[int]]:
    """``({line: comment text}, lines holding nothing but a comment)`` of Python ``source``."""
    comments, code_lines = {}, set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
        elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            code_lines.update(range(tok.start[0], tok.end[0] + 1))
    return comments, set(comments) - code_lines


def _described(node: ast.AST, comments: dict[int, str], alone: set[int]) -> str:
    """The comments written on the lines of ``node``, after the comment lines directly above it."""
    above, line = [], node.lineno - 1
    while line in alone:
        above.insert(0, comments[line])
        line -= 1
    inside = [comments[n] for n in range(node.lineno, node.end_lineno + 1) if n in comments]
    return " ".join(above + inside)


def field_comments(options: type) -> dict[str, str]:
    """``{key: comment}`` of an ``Options`` dataclass and the ``Options`` it derives from (a subclass's
    comment on a redeclared key wins)."""
    out = {}
    for klass in reversed(options.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):      # defined where no source is kept (an interactive session)
            continue
        comments, alone = _comments(source)
        for node in ast.parse(source).body[0].body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                text = _described(node, comments, alone)
                if text or node.target.id not in out:
                    out[node.target.id] = text
    return out


def core_comments() -> dict[str, tuple[str, dict[str, str]]]:
    """``{section: (the section's comment, {key: comment})}`` of :data:`rtctl.config.CORE_SCHEMA` as written."""
    source = inspect.getsource(config)
    comments, alone = _comments(source)
    for node in ast.parse(source).body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "CORE_SCHEMA":
            out = {}
            for section, table in zip(node.value.keys, node.value.values):
                keys = {k.value: _described(v, comments, alone) for k, v in zip(table.keys, table.values)}
                out[section.value] = (comments.get(section.lineno, ""), keys)
            return out
    return {}


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return repr(value)


def allowed(key: Key) -> str:
    """The key's choices or bounds, as a reader checks a value against them."""
    if key.choices:
        return ", ".join(f"`{_toml(c)}`" for c in key.choices)
    parts = [f">= {key.low:g}" if key.low is not None else "", "> 0" if key.positive else "",
             f"<= {key.high:g}" if key.high is not None else ""]
    return ", ".join(p for p in parts if p)


def _plain(text: str) -> str:
    """``text`` with ``<`` and ``>`` outside its code spans escaped (a comment's ``<dynamics>`` is no HTML tag)."""
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(p if p.startswith("`") else p.replace("<", "&lt;").replace(">", "&gt;") for p in parts)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def key_table(keys: dict[str, Key], comments: dict[str, str]) -> str:
    rows = ["| key | type | default | allowed | notes |", "|---|---|---|---|---|"]
    for name, key in keys.items():
        default = "required" if key.required else ("none" if key.default is None else f"`{_toml(key.default)}`")
        rows.append(f"| `{name}` | {KINDS.get(key.kind, key.kind)} | {_cell(default)} | {_cell(allowed(key))} | "
                    f"{_cell(_plain(comments.get(name, '')))} |")
    return "\n".join(rows) + "\n"


def summary(obj) -> str:
    """The first paragraph of ``obj``'s own docstring (else its module's), reStructuredText roles and literals
    made Markdown."""
    doc = inspect.cleandoc(obj.__doc__ or inspect.getmodule(obj).__doc__ or "")
    text = " ".join(doc.split("\n\n")[0].split())
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text)
    return _plain(text.replace("``", "`"))


def component_sections() -> list[str]:
    """One Markdown section per component section: each component that may be selected, with its keys."""
    out, owned = [], {}
    for section, (registry, selector, default) in config.COMPONENTS.items():
        head = f"[[drivers]]` (several drivers, each with `joints`) or `[{section}]" if section == "driver" else \
            f"[{section}]"
        out.append(f"## `{head}`\n\nSelected by `{selector}` (default `{_toml(default)}`).\n")
        for name, cls in registry.all().items():
            out.append(f"### `{selector} = {_toml(name)}`\n\n{summary(cls)} (`{cls.__module__}.{cls.__qualname__}`)\n")
            out.append(key_table(schema_keys(cls.Options), field_comments(cls.Options)))
            for owned_name, options in cls.sections.items():
                owned.setdefault(owned_name, (options, []))[1].append(f"`[{section}] {selector} = {_toml(name)}`")
    for name, (options, owners) in sorted(owned.items()):
        out.append(f"## `[{name}]`\n\nOwned by {', '.join(owners)}: taken only when that component is selected.\n")
        out.append(key_table(schema_keys(options), field_comments(options)))
    return out


def sensing_sections() -> list[str]:
    """``[[sensors]]`` (one table per sensor, its backend's keys) and ``[estimator]`` (its type's keys)."""
    from . import sensing
    from .registry import ESTIMATORS, SENSORS

    out = [f"## `[[sensors]]`\n\n{summary(sensing)} One table per sensor, selected by `{sensing.SENSOR_SELECTOR}` "
           f"(default `{_toml(sensing.SENSOR_DEFAULT)}`).\n"]
    for name, cls in SENSORS.all().items():
        out.append(f"### `[[sensors]] {sensing.SENSOR_SELECTOR} = {_toml(name)}`\n\n{summary(cls)} "
                   f"(`{cls.__module__}.{cls.__qualname__}`; kinds {', '.join(f'`{k}`' for k in cls.kinds)})\n")
        out.append(key_table(schema_keys(cls.Options), field_comments(cls.Options)))
    out.append(f"## `[estimator]`\n\nOptional: the floating base's state estimated from the sensors and the joint "
               f"encoders; selected by `{sensing.ESTIMATOR_SELECTOR}`.\n")
    for name, cls in ESTIMATORS.all().items():
        out.append(f"### `[estimator] {sensing.ESTIMATOR_SELECTOR} = {_toml(name)}`\n\n{summary(cls)} "
                   f"(`{cls.__module__}.{cls.__qualname__}`)\n")
        out.append(key_table(schema_keys(cls.Options), field_comments(cls.Options)))
    return out


def robot_sections() -> list[str]:
    """The sections a robot model owns (its factory's ``sections``: checked by a function of its own)."""
    out = []
    for name in config.ROBOTS.names():
        try:
            factory = config.ROBOTS.get(name)
        except ValueError:                # advertised, but its package's extra is not installed
            continue
        for section, check in sorted(getattr(factory, "sections", {}).items()):
            out.append(f"## `[{section}]`\n\nOwned by `[robot] model = {_toml(name)}`. {summary(check)}\n")
    return out


def markdown() -> str:
    """The whole reference page."""
    from .loops.collision import CollisionMonitor

    core = core_comments()
    out = ["# Configuration reference\n",
           "Generated from the schemas a run config is checked against (`rtctl.config.CORE_SCHEMA` and each "
           "component's `Options`), when the site is built: the installed components are listed, a package's "
           "own among them. Units are SI (rad, m, N, N m, s). An unknown key or a value outside these bounds is "
           "an error naming the file, section and key.\n"]
    for section, keys in config.CORE_SCHEMA.items():
        note, comments = core.get(section, ("", {}))
        out.append(f"## `[{section}]`\n\n{note}\n" if note else f"## `[{section}]`\n")
        out.append(key_table(keys, comments))
    out += component_sections()
    out += sensing_sections()
    out.append(f"## `[collision]`\n\n{summary(CollisionMonitor)} (`{CollisionMonitor.__module__}`)\n")
    out.append(key_table(schema_keys(CollisionMonitor.Options), field_comments(CollisionMonitor.Options)))
    out += robot_sections()
    out.append("## `[[schedule]]`\n\nControl-channel commands at control times: each table has `t` (s) and `cmd` "
               "(a command the control channel takes: [control commands](telemetry.md#control-commands)) and that "
               "command's fields.\n")
    return "\n".join(out)


if __name__ == "__main__":
    print(markdown())
