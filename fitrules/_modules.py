"""Modules that can be called, so that ``fr.compare(...)``, ``fr.fit(...)`` and
``fr.tune(...)`` work next to the modules of the same names.

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
