"""An empty cell of a factor column is a level named "missing", never printed as nan.

Found by ``benchmarks/fuzz_cli.py`` (issue 31): ``validate`` listed ``omega (4): 1, 3, 7,
nan`` for a table with an empty omega in some rows.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from tests.helpers import run

sys.path.insert(0, str(Path(__file__).parent))
from fuzzing import NONFINITE  # noqa: E402


def test_validate_names_a_missing_level(tmp_path, capsys):
    rows = [{"H": h, "omega": o, "seed": s, "loss": 2 + 0.01 * h + 0.001 * s}
            for h in (1, 4) for o in (1.0, 3.0, np.nan) for s in (0, 1)]  # fmt: skip
    path = tmp_path / "g.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    code, out, err = run(["validate", path], capsys)
    assert code == 0, err
    assert "omega (3): 1, 3, missing" in out
    assert NONFINITE.search(out) is None, out
