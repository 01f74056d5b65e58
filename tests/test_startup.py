"""Start-up: a command imports what it uses when it uses it.

scipy.stats alone took 2.1 of the 4.5 to 5.5 seconds of ``fitrules compare --splits 300``
on a quiet 2-core machine (profiled), for a trimmed mean, Holm's adjustment and the t
distribution.
"""

import subprocess
import sys

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
    loaded = _modules_after("import fitrules")
    assert not {"numpy", "pandas", "scipy", "matplotlib"} & loaded


def test_compare_command_does_not_import_scipy_stats_statsmodels_or_matplotlib():
    loaded = _modules_after(
        "import io, contextlib\nfrom fitrules.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['compare', '--splits', '20']) == 0"
    )
    assert "fitrules.jobs.compare" in loaded
    assert not [m for m in HEAVY if m in loaded]
