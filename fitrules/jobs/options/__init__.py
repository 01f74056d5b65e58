"""Every job's options, declared once (see :mod:`fitrules.base.options`).

The shared groups (data, tuning, objective, fitting, guard, bootstrap, outputs) come first,
then one :class:`~fitrules.base.options.Command` per command, its options in the order of its
``--help``. The Python functions (:mod:`fitrules.jobs.public`) take their defaults from here, the
command line (:mod:`fitrules.cli`) is made from here, and ``tests/api/test_faces.py`` checks
that the two agree.
"""

from __future__ import annotations

# fr.compare reads the default number of random splits from here, beside the declarations
from fitrules.base.limits import RANDOM_SPLITS
from fitrules.jobs.options.comparing import COMPARE, DESIGN, RULES, SEARCH
from fitrules.jobs.options.forms import (
    FORMS,
    FORMS_ADD,
    FORMS_LIST,
    FORMS_REMOVE,
    FORMS_SHOW,
)
from fitrules.jobs.options.grid import CI, SIMULATE, VALIDATE
from fitrules.jobs.options.groups import LOAD_GRID, tune_seed_list
from fitrules.jobs.options.one_form import (
    ALLOCATE,
    FIT,
    LEDGER,
    LEDGER_VERIFY,
    PREDICT,
    SCORE,
)

# in the order of `fitrules --help`
COMMANDS = (
    COMPARE,
    DESIGN,
    SEARCH,
    FIT,
    ALLOCATE,
    VALIDATE,
    CI,
    PREDICT,
    SCORE,
    LEDGER,
    LEDGER_VERIFY,
    FORMS,
    FORMS_LIST,
    FORMS_SHOW,
    FORMS_ADD,
    FORMS_REMOVE,
    SIMULATE,
)

__all__ = [
    "ALLOCATE",
    "CI",
    "COMMANDS",
    "COMPARE",
    "DESIGN",
    "FIT",
    "FORMS",
    "FORMS_ADD",
    "FORMS_LIST",
    "FORMS_REMOVE",
    "FORMS_SHOW",
    "LEDGER",
    "LEDGER_VERIFY",
    "LOAD_GRID",
    "PREDICT",
    "RANDOM_SPLITS",
    "RULES",
    "SCORE",
    "SEARCH",
    "SIMULATE",
    "VALIDATE",
    "tune_seed_list",
]
