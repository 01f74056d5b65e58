"""The figures the docs pages show, made by the pages' own Python calls.

    python docs/figures/make_figures.py            # rewrites docs/figures/*.png
    python docs/figures/make_figures.py OUT_DIR    # elsewhere (the test does this)

Each page's figures come from the calls its Python block makes (the same grids, forms and
numbers of splits), drawn at ``DPI`` so the PNGs stay small. ``FIGURES`` says which page
shows which file; ``tests/project/test_docs.py`` checks that every page shows exactly its
figures and, as a slow test, that this script still makes them.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

DPI = 80  # a 7 x 4.5 inch figure is 560 x 360 pixels, 20 to 60 kB
HERE = Path(__file__).resolve().parent

# page (docs/<page>.md) -> the PNGs it shows; the cluster page makes a table, not a figure
FIGURES: dict[str, list[str]] = {
    "quickstart": ["quickstart-heldout.png", "quickstart-paired.png", "quickstart-curves.png"],
    "tutorials/own-table": ["own-table-curves.png", "own-table-residuals.png"],
    "tutorials/add-a-form": ["add-a-form-residuals.png"],
    "tutorials/fit-and-predict": ["fit-and-predict-curves.png", "fit-and-predict-fit.png"],
    "tutorials/paired-ci": ["paired-ci-differences.png", "paired-ci-tuning.png"],
    "tutorials/design-and-ledger": ["design-and-ledger-design.png"],
    "tutorials/search": ["search-front.png"],
    "tutorials/cluster": [],
}


def _quickstart():
    import fitrules as fr

    g = fr.load_example("main", where="lr == 3e-4")
    mine = fr.Form("mine", "L0 + a*omega**c", variables=("omega",))
    c = fr.compare(g, forms=["composition", "additive", mine], splits=300, progress=False)
    f = fr.fit(g, "composition", intervals=True)
    yield "quickstart-heldout.png", c.plot_heldout()
    yield "quickstart-paired.png", c.plot_paired("composition", "additive")
    yield "quickstart-curves.png", f.plot_curves("H")


def _own_table():
    import pandas as pd

    import fitrules as fr

    df = pd.read_csv(fr.example_path("main"))
    df = df[df["lr"] == 3e-4].rename(
        columns={"H": "inner_steps", "seed": "run_seed", "loss": "val/loss"}
    )
    g = fr.load_grid(df, metric="val/loss", seed_col="run_seed", rename={"inner_steps": "H"})
    c = fr.compare(g, forms=["composition", "additive", "log_additive"], splits=300,
                   progress=False)  # fmt: skip
    labels = {"val/loss": "validation loss", "H": "inner steps per sync", "omega": "ω"}
    yield "own-table-curves.png", c.plot_curves("composition", "H", labels=labels)
    yield "own-table-residuals.png", c.plot_residuals("H", labels=labels)


def _add_a_form():
    import fitrules as fr

    g = fr.load_example("main", where="lr == 3e-4")
    mine = fr.Form("mine", "L0 + a*omega**c*(H/16)**b", variables=("H", "omega"))
    c = fr.compare(g, forms=["composition", mine, "comp_h = L0[H] + a*omega*(H/16)**b"],
                   splits=100, progress=False)  # fmt: skip
    yield "add-a-form-residuals.png", c.plot_residuals("H")


def _fit_and_predict():
    import fitrules as fr

    g = fr.load_example("main", where="lr == 3e-4")
    f = fr.fit(g, "composition", intervals=True)
    yield "fit-and-predict-curves.png", f.plot_curves("omega")
    yield "fit-and-predict-fit.png", f.plot_fit()


def _paired_ci():
    import fitrules as fr

    p = fr.ci(fr.load_example("paired_tuned"), baseline="algo=sync",
              treatment="algo=diloco,H=16,keep=1", tune="lr", tune_seeds=[0, 1, 2])  # fmt: skip
    t = fr.tune(fr.load_example("main"), "lr")
    yield "paired-ci-differences.png", p.plot()
    yield "paired-ci-tuning.png", t.plot_curves()


def _design_and_ledger():
    import fitrules as fr

    g = fr.load_example("main", where="lr == 3e-4")
    d = fr.design(g, forms=["composition", "additive"], budget=12)
    yield "design-and-ledger-design.png", d.plot()


def _search():
    import fitrules as fr

    # the page's first command: `fitrules search --yes` on the default grid
    s = fr.search(fr.load_example("main", where="lr == 3e-4"), progress=False, jobs=2, yes=True)
    yield "search-front.png", s.plot_front()


MAKERS = {
    "quickstart": _quickstart,
    "tutorials/own-table": _own_table,
    "tutorials/add-a-form": _add_a_form,
    "tutorials/fit-and-predict": _fit_and_predict,
    "tutorials/paired-ci": _paired_ci,
    "tutorials/design-and-ledger": _design_and_ledger,
    "tutorials/search": _search,
}


def make(out: Path) -> list[Path]:
    """Draw every page's figures into ``out``; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for page, maker in MAKERS.items():
        start = time.perf_counter()
        for name, ax in maker():
            if name not in FIGURES[page]:
                raise SystemExit(f"{name}: not listed for {page} in FIGURES")
            path = out / name
            # no software version inside: the bytes depend on the drawing only
            ax.figure.savefig(path, dpi=DPI, metadata={"Software": None})
            plt.close(ax.figure)
            written.append(path)
        print(f"{page}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    missing = {n for names in FIGURES.values() for n in names} - {p.name for p in written}
    if missing:
        raise SystemExit(f"not drawn: {', '.join(sorted(missing))}")
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    for path in make(target):
        print(f"{path.name}: {path.stat().st_size // 1024} kB")
