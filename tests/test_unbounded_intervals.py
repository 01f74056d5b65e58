"""An interval the grid cannot bound is said to be unbounded, never printed as inf.

Found by ``benchmarks/fuzz_cli.py`` (issue 31's long run): ``fit --form free_omega
--by keep`` makes omega constant within each group, so the per-group intercepts and
amplitudes are not identified; their bootstrap intervals and the prediction's interval over
new seed ids were printed as ``[-inf, inf]`` and ``-inf to inf``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.helpers import run

sys.path.insert(0, str(Path(__file__).parent))
from fuzzing import NONFINITE  # noqa: E402


def test_unidentified_constants_and_their_prediction_print_no_inf(capsys):
    code, out, err = run(["fit", "--form=free_omega", "--objective=log_huber", "--by=keep",
                          "--predict=H=1,keep=0.125", "--resamples=20"], capsys)  # fmt: skip
    assert code == 0, err
    assert NONFINITE.search(out) is None, out
    assert "interval unbounded (not identified by these cells)" in out
    assert "over new seed ids unbounded" in out
