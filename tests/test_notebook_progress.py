"""In a notebook, compare shows tqdm's progress widget by default (issue 32: compare took
20 s in a notebook silently), and the API's results render there."""

from __future__ import annotations

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("ipywidgets")

WIDGET = "application/vnd.jupyter.widget-view+json"


def test_compare_shows_a_progress_widget_in_a_notebook(tmp_path, monkeypatch):
    monkeypatch.delenv("MPLBACKEND", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    cells = [
        "import fitrules as fr",
        'c = fr.compare(forms=["composition", "omega_only"], splits=6)',
        "c.paired[['a', 'b', 'verdict']]",
        'fr.fit(None, "composition").predict(H=8, keep=0.25)',
        "c.summary()",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in cells])
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
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
