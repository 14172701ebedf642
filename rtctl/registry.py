"""Components selected by name from config, found through entry points (python-can's interface lookup).

Seven families: :data:`DRIVERS`, :data:`SENSORS`, :data:`ESTIMATORS`, :data:`PLANTS`, :data:`CONTROLLERS`,
:data:`TRAJECTORIES` and :data:`ROBOTS` (named robot models). A component is found by name in this order:

1. registered in this process (``@DRIVERS.register("name")``: what a script defines for itself);
2. an entry point of the family's group (``rtctl.drivers``, ``rtctl.sensors``, ``rtctl.estimators``,
   ``rtctl.plants``, ``rtctl.controllers``, ``rtctl.trajectories``, ``rtctl.robots``), loaded on first use.
   rtctl's own components are listed there in ``pyproject.toml``, the one place their names are written; a
   third-party package adds its own the same way, without touching rtctl::

       [project.entry-points."rtctl.drivers"]
       my_bus = "my_package.driver:MyBusDriver"

A component's name is the one it is found by (:meth:`Registry.name_of`; ``registered_name`` once loaded).
A component class declares its TOML schema as a dataclass ``Options`` (see :mod:`rtctl.options`), takes
it in its constructor and builds itself from a table with ``from_config(options, context)``.
"""
from __future__ import annotations

import dataclasses
import inspect
from importlib.metadata import entry_points

from .options import did_you_mean


class Registry:
    def __init__(self, kind: str, group: str):
        self.kind = kind
        self.group = group
        self.classes: dict = {}
        self._failed: dict[str, str] = {}
        self._by_value: dict[str, str] | None = None   # "module:qualname" -> entry-point name

    def register(self, name: str):
        """Decorator: make ``obj`` available as ``name`` (its ``registered_name``)."""
        def deco(obj):
            self.classes[name] = obj
            try:
                obj.registered_name = name
            except (AttributeError, TypeError):  # a plain function factory keeps no attributes of ours
                pass
            return obj
        return deco

    def _entry_points(self) -> dict:
        return {ep.name: ep for ep in entry_points(group=self.group)}

    def name_of(self, cls, default: str | None = None) -> str | None:
        """The name ``cls`` (or the nearest class it derives from) is found by: registered in this process, or
        the entry point whose object it is (read from the metadata, without loading anything); ``default``
        when none."""
        if self._by_value is None:
            self._by_value = {ep.value.replace(" ", ""): ep.name for ep in entry_points(group=self.group)}
        for klass in getattr(cls, "__mro__", (cls,)):
            for name, obj in self.classes.items():
                if obj is klass:
                    return name
            name = self._by_value.get(f"{getattr(klass, '__module__', '')}:{getattr(klass, '__qualname__', '')}")
            if name is not None:
                return name
        return default

    def names(self) -> list[str]:
        """Every name this family knows: registered and advertised by entry points."""
        return sorted(set(self.classes) | set(self._entry_points()))

    def get(self, name: str):
        """The component registered as ``name``; ValueError naming the known names (and the nearest)."""
        if not isinstance(name, str):
            raise ValueError(f"{self.kind} name must be a string, got {name!r}")
        if name in self.classes:
            return self.classes[name]
        ep = self._entry_points().get(name)
        if ep is not None:
            try:
                obj = ep.load()
            except Exception as exc:  # noqa: BLE001  (a broken plug-in is reported, never half-loaded)
                raise ValueError(f"{self.kind} {name!r}: entry point {ep.value!r} (group {self.group}) "
                                 f"failed to load: {type(exc).__name__}: {exc}") from None
            return self.register(name)(obj) if name not in self.classes else self.classes[name]
        known = self.names()
        raise ValueError(f"unknown {self.kind} {name!r}{did_you_mean(name, known)}; available: {known}")

    def create(self, name: str, *args, **keywords):
        """Instantiate ``name`` with Python arguments. A class whose constructor takes ``options`` gets the
        keywords its ``Options`` declares as that ``Options`` (checked), after ``args``; the other keywords
        are the constructor's own. Arguments it does not take are refused naming it."""
        cls = self.get(name)
        declared = getattr(cls, "Options", None)
        parameter = inspect.signature(cls).parameters.get("options") if isinstance(cls, type) else None
        takes_options = parameter is not None and parameter.kind is not parameter.VAR_KEYWORD
        if takes_options and dataclasses.is_dataclass(declared):
            fields = {f.name for f in dataclasses.fields(declared)}
            args = (*args, declared(**{k: v for k, v in keywords.items() if k in fields}))
            keywords = {k: v for k, v in keywords.items() if k not in fields}
        try:
            inspect.signature(cls).bind(*args, **keywords)
        except TypeError as exc:
            raise ValueError(f"{self.kind} {name!r} ({getattr(cls, '__name__', cls)}): {exc}") from None
        return cls(*args, **keywords)

    def all(self) -> dict:
        """Every component, loaded (for listings and error messages)."""
        out = {}
        for name in self.names():
            try:
                out[name] = self.get(name)
            except ValueError:
                continue
        return out


DRIVERS = Registry("driver backend", "rtctl.drivers")
PLANTS = Registry("plant", "rtctl.plants")
CONTROLLERS = Registry("controller", "rtctl.controllers")
TRAJECTORIES = Registry("trajectory", "rtctl.trajectories")
ROBOTS = Registry("robot model", "rtctl.robots")
SENSORS = Registry("sensor backend", "rtctl.sensors")
ESTIMATORS = Registry("state estimator", "rtctl.estimators")


class RegisteredName:
    """A component base's class attribute: the name its class is found by in ``registry``
    (:meth:`Registry.name_of`), ``default`` for a class no registry knows."""

    def __init__(self, registry: Registry, default: str):
        self.registry, self.default = registry, default

    def __get__(self, obj, owner):
        return self.registry.name_of(owner, self.default)


def robot_model(name: str):
    """A fresh :class:`rtctl.model.Model` of the named robot model (``ROBOTS``: e.g. ``"stewart"``)."""
    return ROBOTS.get(name)()
