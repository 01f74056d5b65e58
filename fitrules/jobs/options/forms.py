"""The declarations of the form catalogue's commands: forms list, show, add and remove."""

from __future__ import annotations

from fitrules.base.options import Command, Option, options
from fitrules.jobs.options.groups import DATA_UNLABELLED

FORMS = Command(
    "forms",
    "list, show, add or remove forms",
    examples=("fitrules forms list", "fitrules forms show composition"),
)
FORM_NAME = Option("name", flag="name", help="the form's name")
FORMS_LIST = Command("forms list", "list the available forms", examples=("fitrules forms list",))
FORMS_SHOW = Command(
    "forms show",
    "explain one form: variables, linear and nonlinear constants",
    options(FORM_NAME.but(python=False), DATA_UNLABELLED),
    description="Explain one form. A form that declares its variables needs no grid; "
    "otherwise its variables are resolved against --data (default: the main grid).",
    examples=("fitrules forms show composition",),
)
FORMS_ADD = Command(
    "forms add",
    "add a form to forms.toml in the working directory",
    options(
        FORM_NAME.but(
            python=False,
            help='the form\'s name, optionally with its variables: "mine(H, omega)"',
        ),
        Option(
            "expression",
            flag="expression",
            python=False,
            help='the expression, e.g. "L0 + a*omega**c"',
        ),
        DATA_UNLABELLED,
        Option("line", flag=None),
        Option("folder", flag=None),
    ),
    description="Add a form to forms.toml in the working directory. Declare its "
    'variables in the name, e.g. "chin(N, D)"; otherwise every name is checked against '
    "the columns of --data (default: the main grid), so that a misspelt variable is "
    "refused instead of becoming a constant.",
    examples=("fitrules forms add 'mine(H, omega)' 'L0 + a*omega**c*(H/16)**b'",),
)
FORMS_REMOVE = Command(
    "forms remove",
    "remove a form from forms.toml in the working directory",
    options(FORM_NAME, Option("folder", flag=None)),
    examples=("fitrules forms remove mine",),
)
