"""The variable a result's figure draws a form against: the one asked for, which the form
must read, or by default its first."""

from __future__ import annotations

from fitrules.base.errors import FormError


def form_variable(form, x: str | None) -> str:
    """``x`` (default: the first variable of the bound ``form``); a FormError if ``form``
    does not read it."""
    x = x or form.bound_variables[0]
    if x not in form.bound_variables:
        raise FormError(f"form {form.name!r} reads {', '.join(form.bound_variables)}, not {x!r}")
    return x
