"""The staging of the candidates: probe fits drop twins and constants without effect, a staged
search screens the rest on a few inner splits, and the survivors get the full nested fits."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fitrules.base.errors import FitrulesError
from fitrules.engine.fit import FitOptions, fit_splits
from fitrules.engine.grammar import DUPLICATE_RTOL, Candidate, TwinIndex, structural_rank_ok
from fitrules.jobs.search.hopeless import (
    HOPELESS_RATIO,
    PRESCREEN_KEEP,
    PRESCREENED,
    PRUNED,
    hopeless,
    prescreened,
    training_rms,
)
from fitrules.jobs.search.protocol import _RANK, NestedMasks, _sub_seed
from fitrules.jobs.search.scoring import Scored, _score
from fitrules.jobs.search.workers import _STATE, _chunks, _run
from fitrules.model.compiled import CompiledForm

# a staged search (above SCREEN_ABOVE candidates, or --screen K): every candidate fitted on the
# first SCREEN_SPLITS inner splits of each outer split, the SCREEN_KEEP best of each number of
# constants kept there for the full nested fits
SCREEN_SPLITS = 2
SCREEN_KEEP = 25
SCREEN_ABOVE = 2_000
# the probes that find duplicate forms compare fitted values to 1e-6: fitted to compare's
# resolution (one fit per probe, so the cost is small)
PROBE_FIT_OPTIONS = FitOptions(grid_points=(41, 17, 9), n_starts=1, start_budget=8)


@dataclass
class _Fitted:
    """The candidates kept and their nested errors, those dropped with why, and a staged
    search's survivors."""

    kept: list[Candidate]
    results: list[Scored]
    dropped: list[tuple[Candidate, str]]
    allowed_outer: np.ndarray | None = None
    allowed_final: np.ndarray | None = None
    screen_note: dict | None = None
    counted: int = 0  # candidates screen="auto" counts: those kept and those pruned as hopeless
    rows: tuple[int, int] = (0, 0)  # nested rows to fit (training fit not hopeless), and all

    @property
    def share(self) -> float:
        """The share of the nested rows fitted (1 before any candidate)."""
        return self.rows[0] / self.rows[1] if self.rows[1] else 1.0


class _KeptPrints:
    """The fingerprints of the candidates kept so far and their names: the twins a new
    candidate is checked against, across every step of a growing budget."""

    def __init__(self) -> None:
        self.twins = TwinIndex(DUPLICATE_RTOL)
        self.names: list[str] = []
        # constants -> the lowest training RMS on each outer training set and all cells
        self.best_rms: dict[int, np.ndarray] = {}


# the tasks run on the workers (module-level, so that they pickle): each reads the state the
# worker holds in workers._STATE (the same dict, set by workers._set_state)
def _fingerprint_task(indices: list[int]) -> list[tuple[int, bool, np.ndarray | None]]:
    s = _STATE
    out: list[tuple[int, bool, np.ndarray | None]] = []
    for i in indices:  # their structural rank was checked with their training fits
        out.append((i, True, _probe_values(s["forms"][i], s["X"], s["probes"], s["objective"])))
    return out


def _alive(s: dict, i: int) -> np.ndarray | None:
    alive = s.get("alive")
    return None if alive is None else alive[i]


def _nested_task(indices: list[int]) -> list[tuple[int, Scored]]:
    s = _STATE
    return [(i, _score(s["forms"][i], s, alive=_alive(s, i))) for i in indices]


def _screen_task(indices: list[int]) -> list[tuple[int, Scored]]:
    s = _STATE
    return [(i, _score(s["forms"][i], s, only=s["screen_rows"], alive=_alive(s, i)))
            for i in indices]  # fmt: skip


def _training_task(indices: list[int]) -> list[tuple[int, bool, np.ndarray | None]]:
    """Each form's structural rank check, and its training RMS on every outer training set
    and on all cells (the outer fits' runs under the cells-and-seeds protocol). The RMS is
    None when nothing is pruned (:func:`fitrules.jobs.search.hopeless.prunes`) and, unless
    the search prescreens, for a form with exponents; a form with exponents is read on the
    grid its fits start from."""
    s = _STATE
    masks, held = s["masks"], s.get("seeds")
    sets = np.vstack([masks.train[masks.outer], masks.train[masks.whole][None]])
    out: list[tuple[int, bool, np.ndarray | None]] = []
    for i in indices:
        form = s["forms"][i]
        rng = np.random.default_rng(_sub_seed(s["seed"], _RANK, i))
        if not structural_rank_ok(form, s["X"], rng):
            out.append((i, False, None))
            continue
        nonlinear = bool(form.structure.nonlinear)  # the RMS is exact for a linear form alone
        if not s["prune"] or (nonlinear and not s.get("prescreen")):
            out.append((i, True, None))
            continue
        opts = s["options"] if nonlinear else None
        rms = training_rms(form, s["X"], s["y"], sets, s["objective"], opts)
        for k, fold in enumerate(held["folds"] if held else []):
            rows = np.arange(k, masks.n_outer, len(held["folds"]))
            got = training_rms(form, s["X"], fold["y_fit"], sets[rows], s["objective"], opts)
            if rms is not None and got is not None:
                rms[rows] = got
        out.append((i, True, rms))
    return out


def _probe_values(form, X, probes, objective) -> np.ndarray:
    cf = CompiledForm(form)
    out = np.full(probes.shape, np.nan)
    whole = np.ones((1, probes.shape[1]), bool)
    for k, target in enumerate(probes):
        r = fit_splits(form, X, target, whole, objective, PROBE_FIT_OPTIONS)[0]
        params = np.array([[r.constants[c] for c in cf.s.constants]], float)
        if np.isfinite(params).all():
            with np.errstate(all="ignore"):
                out[k] = cf.predict(X, params)[0]
    return out


def _fit_candidates(
    fits_ok: list[Candidate],
    too_big: list[Candidate],
    state: dict,
    screen: int | str,
    jobs: int,
    on_progress: Callable[[int], None] | None,
    client,
    kept: _KeptPrints | None = None,
    allow_none: bool = False,
    before: int = 0,
) -> _Fitted:
    """Drop the candidates that cannot be told apart (from each other and from those
    ``kept`` before), then score the others; with ``allow_none``, a step whose candidates
    are all dropped is empty rather than refused; ``before`` candidates of earlier steps count
    towards ``screen="auto"``'s threshold (a step of a large search is staged too)."""
    done = on_progress or (lambda k: None)
    forms = state["forms"]
    kept = kept or _KeptPrints()
    size = max(1, min(25, len(forms) // max(1, 4 * jobs)))
    # a staged search that prunes prescreens too (each kind's best training fits on each set),
    # decided on the candidates proposed, as the plan counts them (staging itself is decided
    # later on those not dropped as twins: the two differ only at a count near SCREEN_ABOVE)
    state["prescreen"] = bool(state["prune"] and screen_size(screen, before + len(forms)))
    trained = _run(_chunks(range(len(forms)), size), _training_task, state, jobs,
                   lambda k: None, client)  # fmt: skip
    rms = {i: r for i, ok, r in trained if ok}
    no_effect = [(fits_ok[i], NO_EFFECT) for i, ok, _ in trained if not ok]
    live, gone = _hopeless_rows(rms, fits_ok, state, kept)
    prints = _run(_chunks(live, size), _fingerprint_task, state, jobs, done, client)
    dropped, keep_idx = _prune(prints, fits_ok, too_big, state, kept)
    dropped += no_effect + gone
    todo = list(keep_idx)
    done(len(forms) - len(live))  # the first pass: those pruned had no fingerprint
    done(len(forms) - len(todo))
    scored, allowed_outer, allowed_final, screen_note = _score_candidates(
        todo, fits_ok, state, screen, size, jobs, done, client, before + len(gone)
    )
    if not keep_idx and not allow_none:
        counts = Counter(why.split(" as ")[0].split(" (")[0] for _, why in dropped)
        raise FitrulesError(
            "every proposed form was dropped before fitting ("
            + "; ".join(f"{k}: {v}" for k, v in counts.items())
            + "); allow more terms, factors or variables"
        )
    return _Fitted(
        [fits_ok[i] for i in keep_idx],
        [scored[i] for i in keep_idx],
        dropped,
        allowed_outer,
        allowed_final,
        screen_note,
        len(keep_idx) + len(gone),
        (int(state["alive"].sum()), int(state["alive"].size)),
    )


TOO_BIG = "more constants than the fewest cells fitted"  # a dropped candidate's reason
NO_EFFECT = "a constant has no effect on the grid's cells"  # another


def _hopeless_rows(
    rms: dict, fits_ok: list[Candidate], state: dict, kept: _KeptPrints
) -> tuple[list[int], list[tuple[Candidate, str]]]:
    """The candidates still to fingerprint (those whose training fit is not hopeless on
    every outer training set and on all cells, nor, when the search prescreens, outside the
    best of its kind on every one of them) and those dropped; sets ``state["alive"]``, each
    candidate's nested rows to fit (:mod:`~fitrules.jobs.search.hopeless`)."""
    masks = state["masks"]
    have = [i for i in range(len(fits_ok)) if rms.get(i) is not None]  # none: nothing pruned
    linear = [i for i in have if not fits_ok[i].n_nonlinear]  # exact RMS: judged hopeless
    H = np.zeros((len(fits_ok), masks.n_outer + 1), bool)
    if linear:
        k = np.array([fits_ok[i].n_constants for i in linear])
        H[linear] = hopeless(np.array([rms[i] for i in linear]), k, kept.best_rms)
    P = np.zeros_like(H)
    if state.get("prescreen") and have:
        kinds = np.array([(fits_ok[i].n_constants, fits_ok[i].n_nonlinear) for i in have])
        P[have] = prescreened(np.array([rms[i] for i in have]), kinds, PRESCREEN_KEEP)
    # the user's own forms (references) compete in full: their worth is the question asked
    refs = [i for i, c in enumerate(fits_ok) if c.key.startswith("reference ")]
    H[refs], P[refs] = False, False
    out = H | P
    alive = np.ones((len(fits_ok), len(masks.train)), bool)
    alive[:, masks.outer] = ~out[:, :-1]
    alive[:, masks.inner] = np.repeat(~out[:, :-1], masks.n_inner, axis=1)
    alive[:, masks.final.start :] = ~out[:, -1:]
    state["alive"] = alive
    gone = [(fits_ok[i], f"{PRUNED} (its training RMS above {HOPELESS_RATIO:g}x that of a "
             "form of no more constants on every outer training set and on all cells)")
            for i in np.flatnonzero(H.all(axis=1))]  # fmt: skip
    gone += [(fits_ok[i], f"{PRESCREENED} (outside the {PRESCREEN_KEEP} lowest training RMS of "
              "its constants and exponents on every outer training set and on all cells)")
             for i in np.flatnonzero(out.all(axis=1) & ~H.all(axis=1))]  # fmt: skip
    live = [i for i in range(len(fits_ok)) if i in rms and not out[i].all()]
    return live, gone


def _prune(
    prints: list,
    fits_ok: list[Candidate],
    too_big: list[Candidate],
    state: dict,
    kept: _KeptPrints,
) -> tuple[list[tuple[Candidate, str]], list[int]]:
    """The candidates dropped, with why (too many constants, a constant with no effect, the
    same function as one kept), and the indices of those kept (added to ``kept``)."""
    n_fit = state["masks"].min_train
    dropped: list[tuple[Candidate, str]] = [(c, f"{TOO_BIG} ({n_fit})") for c in too_big]
    keep_idx: list[int] = []
    twins, owners = kept.twins, kept.names
    scale = np.maximum(np.abs(state["probes"]), 1e-300).ravel()
    for i, identifiable, values in prints:
        c = fits_ok[i]
        if not identifiable:
            dropped.append((c, NO_EFFECT))
            continue
        if values is not None and np.isfinite(values).all():
            fp = values.ravel() / scale
            same = twins.twin(fp)
            if same is not None:
                dropped.append((c, f"the same function on these cells as {owners[same]}"))
                continue
            twins.add(fp)
            owners.append(c.form.name)
        keep_idx.append(i)
    return dropped, keep_idx


def _score_candidates(
    todo: list[int],
    fits_ok: list[Candidate],
    state: dict,
    screen: int | str,
    size: int,
    jobs: int,
    done: Callable[[int], None],
    client,
    before: int = 0,
) -> tuple[dict[int, Scored], np.ndarray | None, np.ndarray | None, dict | None]:
    """Each candidate's nested errors: all in full or, staged, the screen's survivors in
    full; with the survivors of each outer split and the final choice, and a note."""
    scored: dict[int, Scored] = {}
    keep_n = screen_size(screen, before + len(todo))
    if not keep_n:
        for i, s in _run(_chunks(todo, size), _nested_task, state, jobs, done, client):
            scored[i] = s
        return scored, None, None, None
    # stage 1: every candidate on the first inner splits of each outer split and the
    # first final splits; stage 2: the full nested fits of those that rank in the top
    # keep_n of their number of constants somewhere (each outer split then picks only
    # among the candidates its own screen kept: the screen reads no outer test cell)
    masks = state["masks"]
    state["screen_rows"] = screen_rows(masks, SCREEN_SPLITS)
    for i, s in _run(_chunks(todo, size), _screen_task, state, jobs, done, client):
        scored[i] = s
    k_of = np.array([fits_ok[i].n_constants for i in todo])
    errs = np.array([scored[i].error for i in todo])
    allowed_outer, allowed_final = survivors(errs, k_of, masks, SCREEN_SPLITS, keep_n)
    full = [todo[j] for j in np.flatnonzero(allowed_outer.any(axis=1) | allowed_final)]
    for i, s in _run(_chunks(full, size), _nested_task, state, jobs, done, client):
        scored[i] = s
    screen_note = {"keep": keep_n, "splits": SCREEN_SPLITS, "screened": len(todo),
                   "validated": len(full)}  # fmt: skip
    return scored, allowed_outer, allowed_final, screen_note


def screen_size(screen: int | str, n: int) -> int:
    """Survivors per outer split and number of constants of a staged search (0: none,
    every candidate gets the full nested fits). ``auto``: :data:`SCREEN_KEEP` above
    :data:`SCREEN_ABOVE` candidates, else 0."""
    if screen == "auto":
        return SCREEN_KEEP if n > SCREEN_ABOVE else 0
    return int(screen)


def screen_rows(masks: NestedMasks, k: int) -> np.ndarray:
    """The rows a staged search's screen fits: the first ``k`` inner splits of each outer
    split and the first ``k`` final splits."""
    rows = np.zeros(len(masks.train), bool)
    k = min(k, masks.n_inner)
    for o in range(masks.n_outer):
        start = masks.n_outer + o * masks.n_inner
        rows[start : start + k] = True
    f = masks.final
    rows[f.start : min(f.start + max(k, 1), f.stop)] = True
    return rows


def survivors(
    errors: np.ndarray, n_constants: np.ndarray, masks: NestedMasks, k: int, keep: int
) -> tuple[np.ndarray, np.ndarray]:
    """Which candidates each outer split (C x outer) and the final choice (C,) keep after
    the screen: per number of constants, the ``keep`` with the lowest median screened
    error (log scale; a failed fit counts as infinitely bad)."""
    C = len(errors)
    k = min(k, masks.n_inner)
    with np.errstate(divide="ignore", invalid="ignore"):
        L = np.log(np.where(np.isfinite(errors) & (errors > 0), errors, np.inf))
    L = np.where(np.isnan(L), np.inf, L)

    def top(score: np.ndarray) -> np.ndarray:
        out = np.zeros(C, bool)
        for c in np.unique(n_constants):
            idx = np.flatnonzero(n_constants == c)
            order = idx[np.argsort(score[idx], kind="stable")][:keep]
            out[order[np.isfinite(score[order])]] = True
        return out

    allowed = np.zeros((C, masks.n_outer), bool)
    for o in range(masks.n_outer):
        start = masks.n_outer + o * masks.n_inner
        allowed[:, o] = top(np.median(L[:, start : start + k], axis=1))
    f = masks.final.start
    final = top(np.median(L[:, f : f + max(k, 1)], axis=1))
    return allowed, final
