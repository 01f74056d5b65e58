"""Figures. Each function takes an optional matplotlib Axes, draws on it and returns it."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # reports are files; never open a window

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from fitrules.fit import predict  # noqa: E402


def _legend(ax, **kwargs) -> None:
    """A legend when something is labelled (a form with no usable split draws nothing)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**kwargs)


def _ax(ax, size=(7.0, 4.5)):
    if ax is None:
        _, ax = plt.subplots(figsize=size, layout="constrained")
    return ax


def _usable(cmp, form):
    df = cmp.results[cmp.results["form"] == form]
    ok = df["heldout_error_pct"].notna()
    if not cmp.settings["keep_degenerate"]:
        ok &= ~df["degenerate"]
    return df[ok]


def heldout_ecdf(cmp, ax=None):
    """Empirical CDF of the held-out error of every form, on shared axes."""
    ax = _ax(ax)
    allv = []
    for f in cmp.forms:
        e = np.sort(_usable(cmp, f.name)["heldout_error_pct"].to_numpy())
        if len(e) == 0:
            continue
        allv.append(e)
        ax.step(
            e,
            np.arange(1, len(e) + 1) / len(e),
            where="post",
            label=f"{f.name} (median {np.median(e):.2f}%, n={len(e)})",
        )
    if allv:
        v = np.concatenate(allv)
        if v.max() / max(v.min(), 1e-12) > 30:
            ax.set_xscale("log")
        # the tail of a few runaway extrapolations should not squash the body of the curves
        ax.set_xlim(max(v.min() * 0.9, 1e-3), min(v.max() * 1.1, np.percentile(v, 99) * 3))
    ax.set_xlabel("held-out error (mean |relative error| over held-out cells, %)")
    ax.set_ylabel("fraction of splits at or below")
    ax.set_title(
        f"Held-out error over {cmp.settings['n_splits']} {cmp.settings['protocol']} "
        "splits (valid splits)"
    )
    ax.grid(alpha=0.3)
    _legend(ax, fontsize=8, loc="lower right")
    return ax


def paired_scatter(cmp, a: str, b: str, ax=None):
    """One point per split valid for both forms: a's error against b's; the diagonal drawn."""
    ax = _ax(ax, (5.0, 5.0))
    ea = _usable(cmp, a).set_index("split")["heldout_error_pct"]
    eb = _usable(cmp, b).set_index("split")["heldout_error_pct"]
    both = ea.index.intersection(eb.index)
    x, y = ea.loc[both].to_numpy(), eb.loc[both].to_numpy()
    wins = int((x < y).sum())
    ax.scatter(x, y, s=12, alpha=0.6, color="C0", label=f"splits (n={len(both)})")
    if len(both):
        lo = max(min(x.min(), y.min()) * 0.8, 1e-3)
        hi = max(x.max(), y.max()) * 1.2
        if hi / lo > 30:
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.plot([lo, hi], [lo, hi], color="k", lw=1, label="equal error")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
    ax.set_xlabel(f"{a}: held-out error (%)")
    ax.set_ylabel(f"{b}: held-out error (%)")
    ax.set_title(
        f"{a} vs {b}: {a} lower in {wins} of {len(both)} splits\n"
        f"(points above the diagonal: {a} better)",
        fontsize=10,
    )
    _legend(ax, fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)
    return ax


def observed_vs_predicted(cmp, form: str, ax=None):
    """Full-grid fit: each cell's seed mean (with standard error) against the prediction."""
    ax = _ax(ax, (5.0, 5.0))
    t = cmp.cells.table
    f = next(x for x in cmp.forms if x.name == form)
    pred = predict(f, cmp.cells.X, cmp.full_fits[form].constants)
    ax.errorbar(
        pred,
        t["value"],
        yerr=t["sem"].fillna(0),
        fmt="o",
        ms=4,
        capsize=2,
        label="cells (mean ± s.e. over seeds)",
    )
    lo = min(pred.min(), t["value"].min())
    hi = max(pred.max(), t["value"].max())
    pad = 0.05 * (hi - lo)
    ax.plot(
        [lo - pad, hi + pad], [lo - pad, hi + pad], color="k", lw=1, label="observed = predicted"
    )
    ax.set_xlabel(f"predicted {cmp.cells.metric} ({form}, fitted on all cells)")
    ax.set_ylabel(f"observed {cmp.cells.metric} (nats)")
    ax.set_title(f"{form}: observed against predicted")
    _legend(ax, fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)
    return ax


def residual_map(cmp, form: str, x: str, y: str, ax=None):
    """Relative residual (%) of the full-grid fit over two factors, as a labelled heat map."""
    ax = _ax(ax, (5.5, 4.5))
    t = cmp.cells.table.copy()
    f = next(v for v in cmp.forms if v.name == form)
    t["res"] = (
        100 * (predict(f, cmp.cells.X, cmp.full_fits[form].constants) - t["value"]) / t["value"]
    )
    grid = t.pivot_table(index=y, columns=x, values="res", aggfunc="mean")
    finite = np.isfinite(grid.to_numpy(float))
    if not finite.any():  # the fit on all cells predicts nothing finite: say so, draw nothing
        ax.text(
            0.5,
            0.5,
            f"{form}: the fit on all cells gives no finite prediction",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
        ax.set_axis_off()
        return ax
    lim = max(float(np.abs(grid.to_numpy(float)[finite]).max()), 1e-6)
    im = ax.imshow(
        grid.to_numpy(), cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto", origin="lower"
    )
    for i in range(grid.shape[0]):
        for j in range(grid.shape[1]):
            v = grid.iat[i, j]
            if np.isfinite(v):
                ax.text(
                    j,
                    i,
                    f"{v:+.1f}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if abs(v) > 0.6 * lim else "black",
                )
    ax.set_xticks(range(grid.shape[1]), [f"{c:g}" for c in grid.columns])
    ax.set_yticks(range(grid.shape[0]), [f"{r:g}" for r in grid.index])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(f"{form}: (predicted - observed) / observed, %")
    ax.figure.colorbar(im, ax=ax, label="relative residual (%)")
    return ax


def metric_vs(cmp, form: str, x: str = "omega", by: str = "H", ax=None):
    """Cell means against ``x``, one colour per level of ``by``, with the fitted form."""
    ax = _ax(ax)
    t = cmp.cells.table
    f = next(v for v in cmp.forms if v.name == form)
    consts = cmp.full_fits[form].constants
    for i, (level, g) in enumerate(t.groupby(by)):
        g = g.sort_values(x)
        ax.errorbar(
            g[x],
            g["value"],
            yerr=g["sem"].fillna(0),
            fmt="o",
            ms=4,
            capsize=2,
            color=f"C{i}",
            label=f"{by}={level:g}",
        )
        dense = np.linspace(g[x].min(), g[x].max(), 100)
        X = {v: np.full_like(dense, g[v].iloc[0]) for v in cmp.cells.variables}
        X[x] = dense
        ax.plot(dense, predict(f, X, consts), color=f"C{i}", lw=1.2)
    ax.set_xlabel(x)
    ax.set_ylabel(f"{cmp.cells.metric} (nats; mean ± s.e. over seeds)")
    ax.set_title(f"Data (points) and {form} fitted on all cells (lines)")
    _legend(ax, fontsize=8, ncol=2)
    ax.grid(alpha=0.3)
    return ax


def paired_differences(ci, ax=None):
    """Per-seed differences (treatment - baseline), the mean, and both intervals."""
    ax = _ax(ax, (6.5, 4.0))
    d = np.asarray(ci.diffs)
    seeds = [str(s) for s in ci.seeds]
    ax.axhline(0, color="k", lw=1)
    ax.scatter(range(len(d)), d, color="C0", zorder=3, label="one seed: treatment - baseline")
    ax.axhline(ci.mean_diff, color="C1", lw=1.5, label=f"mean {ci.mean_diff:+.4f}")
    pct = round(100 * ci.level)
    lo, hi = ci.t_interval
    ax.axhspan(lo, hi, color="C1", alpha=0.15, label=f"{pct}% paired-t interval")
    blo, bhi = ci.bootstrap_interval
    if blo is not None:
        ax.axhline(blo, color="C2", ls="--", lw=1, label=f"{pct}% bootstrap (BCa) interval")
        ax.axhline(bhi, color="C2", ls="--", lw=1)
    ax.set_xticks(range(len(d)), seeds)
    ax.set_xlabel("seed")
    ax.set_ylabel(f"difference in {ci.units}")
    ax.set_title(f"{ci.treatment} minus {ci.baseline}", fontsize=10)
    _legend(ax, fontsize=8, loc="best")
    ax.grid(alpha=0.3)
    return ax


def save(ax, path) -> None:
    ax.figure.savefig(path, dpi=110)
    plt.close(ax.figure)


def errors_by_split(cmp, ax=None):
    """Held-out error of each form in each split (grouped bars), with the noise floor."""
    t = cmp.results
    splits = sorted(t["split"].unique())
    labels = [t.loc[t["split"] == s, "split_label"].iloc[0] for s in splits]
    names = [f.name for f in cmp.forms]
    ax = _ax(ax, (max(7.5, 1.6 * len(splits) + 4), 4.5))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        d = t[t["form"] == name].set_index("split").loc[splits]
        vals = d["heldout_error_pct"].to_numpy(float)
        hatch = ["//" if deg else "" for deg in d["degenerate"]]
        bars = ax.bar(
            np.arange(len(splits)) + (i - (len(names) - 1) / 2) * width,
            vals,
            width,
            label=name,
            color=f"C{i}",
        )
        for b, h in zip(bars, hatch, strict=True):
            b.set_hatch(h)
    floor = t.drop_duplicates("split").set_index("split").loc[splits, "noise_floor_pct"]
    x = np.arange(len(splits))
    ax.hlines(
        floor.to_numpy(float),
        x - 0.42,
        x + 0.42,
        colors="k",
        linestyles="--",
        lw=1.5,
        label="noise floor",
        zorder=3,
    )
    ax.set_xticks(range(len(splits)), labels, fontsize=8)
    ax.set_ylabel("held-out error (%)")
    if np.nanmax(t["heldout_error_pct"].to_numpy(float)) > 30 * max(
        np.nanmin(t["heldout_error_pct"].to_numpy(float)), 1e-3
    ):
        ax.set_yscale("log")
    ax.set_title(
        f"Held-out error per split\n{cmp.settings['protocol']} (hatched: degenerate)", fontsize=10
    )
    _legend(ax, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.grid(alpha=0.3, axis="y")
    return ax
