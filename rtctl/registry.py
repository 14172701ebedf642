"""Components selected by name from config (python-can's interface lookup is the model).

Each family -- driver backends, plants, controllers, trajectories -- keeps one
:class:`Registry`; a class joins with ``@registry.register("name")`` and
config code builds it with ``registry.create("name", ...)``.
"""
from __future__ import annotations

import importlib
import inspect


class Registry:
    def __init__(self, kind: str, package: str | None = None):
        self.kind = kind
        self.package = package  # imported before a lookup, so its bundled classes have registered
        self.classes: dict[str, type] = {}

    def register(self, name: str):
        def deco(cls):
            self.classes[name] = cls
            cls.registered_name = name
            return cls
        return deco

    def get(self, name: str) -> type:
        if self.package:
            importlib.import_module(self.package)
        try:
            return self.classes[name]
        except (KeyError, TypeError):
            raise ValueError(f"unknown {self.kind} {name!r}; available: {sorted(self.classes)}") from None

    def create(self, name: str, *args, **options):
        """Instantiate by name; options the class does not take are refused with its name."""
        cls = self.get(name)
        try:
            inspect.signature(cls).bind(*args, **options)
        except TypeError as exc:
            raise ValueError(f"{self.kind} {name!r} ({cls.__name__}): {exc}") from None
        return cls(*args, **options)
