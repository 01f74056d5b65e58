"""In a notebook: the quick start's "From Python" section runs with figures inline and
results as HTML, and compare shows a progress widget."""

from __future__ import annotations

import pytest

from readme import from_python, statements

nbformat = pytest.importorskip("nbformat")

nbclient = pytest.importorskip("nbclient")

pytest.importorskip("ipykernel")

pytest.importorskip("ipywidgets")

WIDGET = "application/vnd.jupyter.widget-view+json"


def _executed(sources: list[str], tmp_path, monkeypatch):
    """A notebook of one code cell a source, run in a Python kernel in ``tmp_path``."""
    # the kernel inherits the environment: a backend chosen for this process (e.g. by a
    # command run in-process) must not decide the notebook's
    monkeypatch.delenv("MPLBACKEND", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    return nb


# slow (10 to 45 s on the project's machine): run by `pytest -m slow` in CI
@pytest.mark.slow
def test_the_readme_runs_as_a_notebook(tmp_path, monkeypatch):
    """The README's Python section runs in a kernel, figures inline as PNG and results as HTML."""
    sources = ["%matplotlib inline", *statements(from_python())]
    nb = _executed(sources, tmp_path, monkeypatch)
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


def test_compare_shows_a_progress_widget_in_a_notebook(tmp_path, monkeypatch):
    """In a notebook fr.compare shows a tqdm widget, and results and predictions render as HTML."""
    cells = [
        "import fitrules as fr",
        'c = fr.compare(forms=["composition", "omega_only"], splits=6)',
        "c.paired[['a', 'b', 'verdict']]",
        'fr.fit(None, "composition").predict(H=8, keep=0.25)',
        "c.summary()",
    ]
    nb = _executed(cells, tmp_path, monkeypatch)
    errors = [o for c in nb.cells for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    widgets = [o for o in nb.cells[1].outputs if WIDGET in o.get("data", {})]
    assert widgets, nb.cells[1].outputs  # tqdm.notebook's bar
    bars = [o["data"].get("text/plain", "") for o in widgets]
    assert any("fitting 2 forms" in b or "HBox" in b for b in bars), bars
    html = {i: "".join(o.get("data", {}).get("text/html", "") for o in nb.cells[i].outputs)
            for i in (2, 3, 4)}  # fmt: skip
    assert "verdict" in html[2] and (
        "predicts better" in html[2] or "not distinguishable" in html[2]
    )
    assert "fitrules prediction" in html[3]
    assert html[4].startswith("<pre>") and "predicts the held-out cells best" in html[4]
