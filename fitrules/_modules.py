"""Modules that can be called, so that ``fr.compare(...)``, ``fr.fit(...)`` and
``fr.tune(...)`` work next to the modules of the same names; and the package's attributes
of those names, which are the API functions as ``help()`` and ``inspect`` see them.

``fitrules.compare``, ``fitrules.fit`` and ``fitrules.tune`` are modules, and importing a
submodule sets the package's attribute of that name to the submodule: a function
``fitrules.compare`` would be replaced by the module the first time anything imported it.
Making each module callable (calling it calls the API function) keeps ``fr.compare(...)``
working whatever was imported before, and leaves ``import fitrules.compare`` and
``from fitrules.compare import compare`` as they were.
"""

from __future__ import annotations

import importlib
import sys
import types


def make_callable(module_name: str, target: str) -> None:
    """Make the module ``module_name`` call ``target`` ("package.module.function")."""
    target_module, _, attr = target.rpartition(".")
    module_doc = sys.modules[module_name].__doc__

    def resolve():
        return getattr(importlib.import_module(target_module), attr)

    class CallableModule(types.ModuleType):
        def __call__(self, *args, **kwargs):
            return resolve()(*args, **kwargs)

        @property
        def __wrapped__(self):  # inspect.signature and help() follow this to the function
            return resolve()

        @property
        def __doc__(self):  # type: ignore[override]
            # help(fr.fit) shows the function first: that is what the user called
            import inspect

            func = resolve()
            return (
                f"{attr}{inspect.signature(func)}\n\n{inspect.getdoc(func)}\n\n"
                f"(The module {module_name}, callable as {attr}(...).)\n\n"
                f"{module_doc or ''}"
            )

    CallableModule.__call__.__doc__ = f"Call ``{target}`` (see its docstring)."
    sys.modules[module_name].__class__ = CallableModule


class ApiFunction:
    """The package attribute ``fitrules.NAME`` of a callable module: calls the API
    function, and is that function to ``help()``, ``inspect.signature`` and ``__doc__``
    (``help(fr.compare)`` shows ``compare``'s docstring, not the module's). The module's
    own names stay reachable through it (``fr.compare.Comparison``), reading and setting.
    """

    __slots__ = ("_module_name", "_target")

    def __init__(self, module_name: str, target: str) -> None:
        object.__setattr__(self, "_module_name", module_name)
        object.__setattr__(self, "_target", target)

    def _module(self):
        return importlib.import_module(self._module_name)

    def _function(self):
        target_module, _, attr = self._target.rpartition(".")
        return getattr(importlib.import_module(target_module), attr)

    def __call__(self, *args, **kwargs):
        return self._function()(*args, **kwargs)

    def __get__(self, obj, objtype=None):  # a routine to inspect and pydoc (never bound)
        return self

    @property
    def __wrapped__(self):
        return self._function()

    @property
    def __doc__(self):  # type: ignore[override]
        return self._function().__doc__

    @property
    def __name__(self) -> str:
        return self._module_name.rpartition(".")[2]

    def __getattr__(self, name: str):
        return getattr(self._module(), name)

    def __setattr__(self, name: str, value) -> None:
        setattr(self._module(), name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._module(), name)

    def __dir__(self) -> list[str]:
        return dir(self._module())

    def __repr__(self) -> str:
        return f"<function {self._target.replace('.api.', '.')} (module {self._module_name})>"


ApiFunction.__module__ = "fitrules"  # help(): "Help on ApiFunction in module fitrules"


def package_with_functions(package_name: str, functions: dict[str, str]) -> dict:
    """Make the package ``package_name`` keep ``ApiFunction`` objects under the names of
    ``functions`` (name -> "module.function"), even when the submodule of that name is
    imported (the import system sets the package's attribute to the submodule)."""
    entries = {n: ApiFunction(f"{package_name}.{n}", t) for n, t in functions.items()}

    class Package(types.ModuleType):
        def __setattr__(self, name, value):
            if name in entries and isinstance(value, types.ModuleType):
                value = entries[name]
            super().__setattr__(name, value)

    package = sys.modules[package_name]
    package.__class__ = Package
    for name, entry in entries.items():
        if name in package.__dict__:  # already imported
            super(Package, package).__setattr__(name, entry)
    return entries
