"""The "From Python" section (of docs/quickstart.md, where it moved from the README in issue
30), run as a notebook: figures show inline and results render as HTML tables."""

from __future__ import annotations

import pytest

from readme import from_python, statements

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")


# slow (10 to 45 s on the project's machine): run by `pytest -m slow` in CI
@pytest.mark.slow
def test_the_readme_runs_as_a_notebook(tmp_path, monkeypatch):
    # the kernel inherits the environment: a backend chosen for this process (e.g. by a
    # command run in-process) must not decide the notebook's
    monkeypatch.delenv("MPLBACKEND", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    sources = ["%matplotlib inline", *statements(from_python())]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()

    errors = [o for c in nb.cells for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    # every plot line shows its figures inline, one PNG per figure
    plots = [c for c in nb.cells if ".plot_" in c.source]
    assert plots
    for c in plots:
        n_png = sum("image/png" in o.get("data", {}) for o in c.outputs)
        assert n_png == c.source.count(".plot_"), (c.source, n_png)
    # tables and result objects render as HTML tables
    code = {c.source.split("#")[0].strip(): c for c in nb.cells}
    shown = ["g", "c.summary", "c.paired", "f.table", "t", "d"]
    shown += [k for k in code if k.startswith("fr.ci(")]
    for key in shown:
        html = [o["data"].get("text/html", "") for o in code[key].outputs if "data" in o]
        assert any("<table" in h for h in html), (key, code[key].outputs)
    assert (tmp_path / "reports" / "mine" / "report.md").exists()
