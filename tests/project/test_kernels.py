"""The golden files and the committed default report under other BLAS kernels: a machine
without AVX2 (OpenBLAS's Prescott and Sandybridge core types) must pass the same suite."""

import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT


def _openblas() -> bool:
    """Whether numpy runs on OpenBLAS (whose core type an environment variable chooses)."""
    config = np.show_config(mode="dicts")
    return "openblas" in str(config.get("Build Dependencies", {}).get("blas", {})).lower()


@pytest.mark.slow
@pytest.mark.skipif(not _openblas(), reason="numpy is not built on OpenBLAS")
@pytest.mark.parametrize("core", ["Prescott", "Sandybridge"])
def test_golden_files_and_reports_hold_on_an_older_kernel(core):
    """Issue 61's promise: a fresh clone passes on any machine. The guided split search's path
    can differ with a last-bit difference in an objective value; what it reaches must stay
    within what the golden files allow (tools/golden.py, REL)."""
    env = dict(os.environ, OPENBLAS_CORETYPE=core, OPENBLAS_NUM_THREADS="1")
    tests = ["tests/project/test_golden.py", "tests/project/test_reports.py"]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", *tests],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout[-3000:]
