"""A contact sheet: every figure type fitrules draws, on three different grids, one sheet per
grid, to look at them side by side.

    python -m tools.contact reports/contact-sheet

The grids: the default grid (``data/main.csv`` at inner lr 3e-4, and its tuned and paired
companions for the tuning and paired-seed figures), the Chinchilla runs (one run per cell,
read from ``../shared/external/``; left out with a note where that folder is absent) and a
four-factor table made here from a known rule with seeded noise (H, keep, width, lr; three
seeds). Every figure is drawn by the same public methods a user calls.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

CHINCHILLA = Path("../shared/external/chinchilla_epoch_svg_extracted.csv")
COLUMNS = 3
THUMB_DPI = 90


def four_factor_table(seed: int = 0) -> pd.DataFrame:
    """Runs of a known four-factor rule with seeded noise: H, keep, width and lr (three
    seeds); the lr optimum moves with H, so the table needs tuning before comparing."""
    rng = np.random.default_rng(seed)
    rows = []
    for H in (1, 4, 16, 64):
        for keep in (1.0, 0.25, 0.0625):
            for width in (128, 256, 512):
                for lr in (1e-3, 3e-3, 1e-2):
                    for s in range(3):
                        omega = 1 / keep - 1
                        best = np.log10(3e-3) - 0.15 * np.log2(H) / 6
                        mean = (
                            1.9
                            + 0.012 * omega * (H / 16) ** 0.5
                            + 40 / width**0.8
                            + 0.08 * (np.log10(lr) - best) ** 2
                        )
                        rows.append({"H": H, "keep": keep, "width": width, "lr": lr, "seed": s,
                                     "loss": mean + 0.003 * rng.standard_normal()})  # fmt: skip
    return pd.DataFrame(rows)


Figure = tuple[str, Callable[[], object]]


def _default() -> Iterator[Figure]:
    import fitrules as fr
    from fitrules import api
    from fitrules.jobs.tune import tune

    g = fr.load_example("main", where="lr == 3e-4")
    c = api.compare(g, forms=["composition", "additive", "log_additive"], splits=300)
    f = api.fit(g, "composition")
    lolo = api.compare(g, forms=["composition", "additive"], split="leave-one-level-out:H")
    ci = api.ci()
    t = tune(fr.load_example("tuned"), "lr")
    d = api.design(g, forms=["composition", "additive"], budget=24)
    yield "heldout_ecdf", c.plot_heldout
    yield "paired composition vs additive", lambda: c.plot_paired("composition", "additive")
    yield "errors by split (leave-one-level-out:H)", lambda: _errors_by_split(lolo)
    yield "observed vs predicted", f.plot_fit
    yield "residuals vs omega (3 forms)", lambda: c.plot_residuals("omega")
    yield "residual map", lambda: _residual_map(c, "composition")
    yield "curves vs H", lambda: f.plot_curves("H")
    yield "curves vs omega", lambda: f.plot_curves("omega")
    yield "paired seeds (ci)", lambda: ci.plot(0)
    yield "tuning curves (tuned grid)", t.plot_curves
    yield "chosen lr (tuned grid)", lambda: t.plot_chosen("H", "keep")
    yield "design", d.plot


def _chinchilla() -> Iterator[Figure]:
    import fitrules as fr
    from fitrules import api

    g = fr.load_grid(CHINCHILLA, derive=["N = `Model Size`", "D = `Training FLOP`/(6*N)"],
                     where="loss < 3.42", units="N=parameters,D=tokens")  # fmt: skip
    forms = ["chin(N, D) = E + A/N**alpha + B/D**beta", "noE(N, D) = A/N**alpha + B/D**beta"]
    c = api.compare(g, forms=forms, splits=100, objective="log_huber")
    f = api.fit(g, forms[0], objective="log_huber")
    d = api.design(g, forms=forms, budget=6, objective="log_huber", splits=30, resamples=30,
                  candidates="N=1e8,1e9,1e10,1e11;D=1e10,1e11,1e12,1e13")  # fmt: skip
    yield "heldout_ecdf", c.plot_heldout
    yield "paired chin vs noE", lambda: c.plot_paired("chin", "noE")
    yield "observed vs predicted", f.plot_fit
    yield "residuals vs N", lambda: c.plot_residuals("N")
    yield "residuals vs D", lambda: c.plot_residuals("D")
    yield "curves vs N", lambda: f.plot_curves("N")
    yield "curves vs D", lambda: f.plot_curves("D")
    yield "design", d.plot


def _four_factor() -> Iterator[Figure]:
    import fitrules as fr
    from fitrules import api
    from fitrules.jobs.tune import tune

    raw = fr.load_grid(four_factor_table(), derive="omega = 1/keep - 1",
                       units="H=inner steps,width=units")  # fmt: skip
    t = tune(raw, "lr")
    g = t.grid
    forms = [
        "four(H, omega, width) = L0 + a*omega*(H/16)**b + c/width**d",
        "two(H, omega) = L0 + a*omega*(H/16)**b",
    ]
    c = api.compare(g, forms=forms, splits=200)
    f = api.fit(g, forms[0])
    lolo = api.compare(g, forms=forms, split="leave-one-level-out:width")
    ci = api.ci(raw, baseline="H=1,keep=1,width=256", treatment="H=16,keep=1,width=256", tune="lr")
    d = api.design(g, forms=forms, budget=12, splits=30, resamples=30)
    yield "heldout_ecdf", c.plot_heldout
    yield "paired four vs two", lambda: c.plot_paired("four", "two")
    yield "errors by split (leave-one-level-out:width)", lambda: _errors_by_split(lolo)
    yield "observed vs predicted", f.plot_fit
    yield "residuals vs width (2 forms)", lambda: c.plot_residuals("width")
    yield "curves vs width", lambda: f.plot_curves("width")
    yield "curves vs H", lambda: f.plot_curves("H")
    yield "paired seeds (ci, tuned)", lambda: ci.plot(0)
    yield "tuning curves", t.plot_curves
    yield "design", d.plot


def _errors_by_split(cmp):
    from fitrules.views import figures

    return figures.errors_by_split(cmp)


def _residual_map(cmp, form: str):
    from fitrules.views import figures

    v = cmp.form(form).bound_variables
    return figures.residual_map(cmp.cells, cmp.form(form), cmp.full_fits[form].constants, *v)


GRIDS: dict[str, tuple[str, Callable[[], Iterator[Figure]]]] = {
    "default": ("the default grid (data/main.csv at lr 3e-4; tuned and paired grids)", _default),
    "chinchilla": ("the Chinchilla runs (one run per cell, log_huber)", _chinchilla),
    "four-factor": ("a four-factor table (H, keep, width, lr; tuned on lr)", _four_factor),
}


def _png(ax) -> np.ndarray:
    buf = io.BytesIO()
    ax.figure.savefig(buf, format="png", dpi=THUMB_DPI)
    plt.close(ax.figure)
    buf.seek(0)
    return plt.imread(buf)


def contact_sheet(name: str, out: Path) -> Path:
    """Draw every figure of grid ``name`` and tile them on one sheet, ``out/NAME.png``."""
    title, figures = GRIDS[name]
    images = [(caption, _png(draw())) for caption, draw in figures()]
    rows = -(-len(images) // COLUMNS)
    fig, axes = plt.subplots(
        rows, COLUMNS, figsize=(6.5 * COLUMNS, 5.4 * rows), squeeze=False, layout="constrained"
    )
    for ax in axes.ravel():
        ax.set_axis_off()
    for ax, (caption, img) in zip(axes.ravel(), images, strict=False):
        ax.imshow(img)
        ax.set_title(caption, fontsize=13)
    fig.suptitle(f"fitrules figures on {title}", fontsize=16)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.png"
    fig.savefig(path, dpi=60, metadata={"Software": None})
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    import os

    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: python -m tools.contact OUT_DIR [GRID ...]", file=sys.stderr)
        return 2
    os.environ.setdefault("MPLBACKEND", "Agg")
    out = Path(argv[0])
    for name in argv[1:] or list(GRIDS):
        if name == "chinchilla" and not CHINCHILLA.exists():
            print(f"{name}: {CHINCHILLA} not found; skipped", file=sys.stderr)
            continue
        print(contact_sheet(name, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
