"""Start-up: a command imports what it uses when it uses it, and importing fitrules forces no
matplotlib backend."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT

HEAVY = ("scipy.stats", "statsmodels", "matplotlib", "scipy.optimize")


def _modules_after(code: str) -> set[str]:
    res = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys\nprint(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    return set(res.stdout.split("\n")[-2].split())


def test_import_fitrules_is_cheap():
    """Importing fitrules loads none of numpy, pandas, scipy or matplotlib."""
    loaded = _modules_after("import fitrules")
    assert not {"numpy", "pandas", "scipy", "matplotlib"} & loaded


def test_compare_command_does_not_import_scipy_stats_statsmodels_or_matplotlib():
    """compare runs without importing scipy.stats, scipy.optimize, statsmodels or matplotlib."""
    loaded = _modules_after(
        "import io, contextlib\nfrom fitrules.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['compare', '--splits', '20']) == 0"
    )
    assert "fitrules.jobs.compare" in loaded
    assert not [m for m in HEAVY if m in loaded]


def test_only_a_gpt_run_imports_torch():
    """The command line's help and every module of the harness load without PyTorch, the
    optional extra that only model = "gpt" needs."""
    loaded = _modules_after(
        "import io, contextlib\nfrom fitrules.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        main(['--help'])\n    except SystemExit:\n        pass\n"
        "import fitrules.sim.runner, fitrules.sim.cluster, fitrules.sim.spec, fitrules.sim.gpt"
    )
    assert "fitrules.sim.gpt" in loaded and "torch" not in loaded


def test_no_backend_is_forced_on_import():
    """Importing fitrules and its figure views keeps the matplotlib backend the user chose."""
    code = (
        "import matplotlib; matplotlib.use('pdf'); import fitrules as fr; "
        "from fitrules.views import figures, design, tuning; "
        "print(matplotlib.get_backend())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "pdf", out.stderr
