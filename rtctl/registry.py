"""Components selected by name from config, found through entry points (python-can's interface lookup).

Five families: :data:`DRIVERS`, :data:`PLANTS`, :data:`CONTROLLERS`, :data:`TRAJECTORIES` and
:data:`ROBOTS` (named robot models). A component is found by name in this order:

1. registered in this process (``@DRIVERS.register("name")``: the bundled components' modules, and
   anything a script defines);
2. an entry point of the family's group (``rtctl.drivers``, ``rtctl.plants``, ``rtctl.controllers``,
   ``rtctl.trajectories``, ``rtctl.robots``), loaded on first use. rtctl's own components are listed
   there in ``pyproject.toml``; a third-party package adds its own the same way, without touching rtctl::

       [project.entry-points."rtctl.drivers"]
       my_bus = "my_package.driver:MyBusDriver"

A component class declares its TOML schema as a dataclass ``Options`` (see :mod:`rtctl.options`) and
builds itself from it with ``from_config(options, context)``.
"""
from __future__ import annotations

import inspect
from importlib.metadata import entry_points

from .options import did_you_mean


class Registry:
    def __init__(self, kind: str, group: str):
        self.kind = kind
        self.group = group
        self.classes: dict = {}
        self._failed: dict[str, str] = {}

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

    def create(self, name: str, *args, **options):
        """Instantiate ``name`` with Python arguments; arguments it does not take are refused naming it."""
        cls = self.get(name)
        try:
            inspect.signature(cls).bind(*args, **options)
        except TypeError as exc:
            raise ValueError(f"{self.kind} {name!r} ({getattr(cls, '__name__', cls)}): {exc}") from None
        return cls(*args, **options)

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


def robot_model(name: str):
    """A fresh :class:`rtctl.model.Model` of the named robot model (``ROBOTS``: e.g. ``"stewart"``)."""
    return ROBOTS.get(name)()
