"""Default ranges read only the grid's variables (issue 31's long CLI fuzz run).

``compare --rename omega=w --form "x = L0 + a*omega*(Hc/H)**b"``: with omega renamed away,
omega is a constant of the form, and the search for each constant's role evaluated the
linear constant ``a`` as if it were a column: a KeyError traceback.
"""

from __future__ import annotations

import numpy as np

from fitrules.model import expr as ex
from fitrules.model.ranges import default_ranges
from tests.helpers import run


def test_a_constant_beside_a_linear_constant_gets_no_range_from_it():
    tree = ex.parse("L0 + a*omega*(Hc/H)**b")
    ranges = default_ranges(tree, ("omega", "Hc", "b"), {"H": np.array([1.0, 4, 16, 64])})
    assert set(ranges) == {"Hc"} and ranges["Hc"].role == "scale of H"


def test_compare_with_a_name_that_is_no_column_is_answered(capsys, tmp_path):
    code, out, err = run(["compare", "--rename", "omega=w", "--splits", "2",
                          "--form", "x = L0 + a*omega*(Hc/H)**b"], capsys)  # fmt: skip
    assert "Traceback" not in err
    assert code in (0, 2), err
