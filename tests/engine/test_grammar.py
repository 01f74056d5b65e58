"""The search grammar (fitrules.engine.grammar): candidates counted and ordered, variables'
references, bad and oversized grammars, twins, structural rank."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from truth import OMEGA, H

from fitrules.base.errors import FormError
from fitrules.engine.grammar import (
    EXPONENT_RANGE,
    HILL_EXPONENT_RANGE,
    ZERO_EXPONENT_RANGE,
    Grammar,
    VariableInfo,
    count_candidates,
    generate,
    load_grammar,
    structural_rank_ok,
)
from fitrules.model.forms import Form


def test_huge_grammar_file_is_refused(tmp_path):
    """A grammar file over 16 MiB is refused before it is read."""
    p = tmp_path / "g.toml"
    p.write_bytes(b"# " + b"x" * (17 * 2**20) + b"\n")
    with pytest.raises(FormError, match="more than the 16 MiB"):
        load_grammar(p)


def test_grammar_counts_constants_and_orders_simplest_first():
    """Candidates come fewest constants first, count their own constants, and respect zeros."""
    cands = generate(
        Grammar(terms=2, max_constants=4), {"H": np.array(H, float), "omega": np.array(OMEGA)}
    )
    assert cands, "no candidates"
    k = [c.n_constants for c in cands]
    assert k == sorted(k) and max(k) <= 4
    for c in cands:  # the count the grammar claims is the form's own count
        assert len(c.form.constants) == c.n_constants
        assert len(c.form.structure.nonlinear) == c.n_nonlinear
    exprs = [c.expression for c in cands]
    assert len(set(exprs)) == len(exprs)
    # omega has zeros: no inverse, log(1 + omega); H is positive: scaled by a power of 2
    assert not any("/omega" in e for e in exprs)
    assert "L0 + a1*log(1 + omega)" in exprs and "L0 + a1*log(H/8)" in exprs
    assert "L0 + a1*(H/8)**e1*omega" in exprs  # the composition rule's family


def test_references_of_variables():
    """A variable's reference is a round number near its middle; negatives allow only linear."""
    assert VariableInfo.of("H", np.array(H, float)).reference == 8  # powers of 2
    assert VariableInfo.of("N", np.array([4e8, 1e9, 7e9])).reference == 1e9
    v = VariableInfo.of("x", np.array([-1.0, 2.0]))
    assert v.allows("linear") and not v.allows("log") and not v.allows("power")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(terms=0), "terms 0"),
        (dict(max_constants=99), "max-constants 99"),
        (dict(max_nonlinear=True), "max-nonlinear True"),
        (dict(factors=("power", "cubic")), "allowed kinds"),
        (dict(factors=()), "allowed kinds"),
        (dict(variables="H"), "list of names"),
        (dict(variables=()), "at least one"),
    ],
)
def test_bad_grammar_is_refused(kwargs, match):
    """A grammar with a bad number, kind or variable list is refused naming the field."""
    with pytest.raises(FormError, match=match):
        Grammar(**kwargs)


def test_grammar_file(tmp_path):
    """A TOML grammar file is read; unknown keys, bad TOML and a missing file are refused."""
    p = tmp_path / "g.toml"
    p.write_text('terms = 2\nfactors = ["power", "log"]\n')
    g = load_grammar(p, max_constants=4)
    assert (g.terms, g.factors, g.max_constants) == (2, ("power", "log"), 4)
    p.write_text("terms = 2\ncolour = 1\n")
    with pytest.raises(FormError, match="unknown key.*colour"):
        load_grammar(p)
    p.write_text("terms = [\n")
    with pytest.raises(FormError, match="not valid TOML"):
        load_grammar(p)
    with pytest.raises(FormError, match="cannot be read"):
        load_grammar(tmp_path / "missing.toml")


def test_structural_rank_finds_constants_without_effect():
    """A power of H on two levels fails the structural rank check; on four levels it passes."""
    rng = np.random.default_rng(0)
    two = {"H": np.array([1.0, 1.0, 4.0, 4.0])}
    f = Form("f", "L0 + a1*(H/2)**e1", ("H",), bounds={"e1": (-3, 3)}, start={"e1": (-3, 3)})
    assert not structural_rank_ok(f, two, rng)  # two levels: a1 and e1 trade off
    four = {"H": np.array([1.0, 2.0, 4.0, 8.0])}
    assert structural_rank_ok(f, four, rng)


def test_twin_index_finds_the_same_first_twin_as_a_full_scan():
    """The twin index returns the same first twin within rtol as a scan of every kept print."""
    from fitrules.engine.grammar import TwinIndex

    rng = np.random.default_rng(3)
    rtol = 1e-6
    base = 1 + 0.01 * rng.standard_normal((100, 40))
    prints = []
    for _ in range(1200):  # twins within rtol, near misses just past it, and new functions
        kind = rng.integers(3)
        if kind == 2 or not prints:
            prints.append(1 + 0.01 * rng.standard_normal(40))
        else:
            src = prints[rng.integers(len(prints))]
            step = rtol * (0.999 if kind == 0 else 1.01)
            shift = np.where(rng.random(40) < 0.5, step, -step) * (rng.random(40) < 0.3)
            prints.append(src + shift)
    prints += list(base)
    index, kept = TwinIndex(rtol), []
    for fp in prints:
        full = np.flatnonzero((np.abs(np.array(kept) - fp) <= rtol).all(axis=1)) if kept else []
        expected = int(full[0]) if len(full) else None
        assert index.twin(fp) == expected
        if expected is None:
            kept.append(fp)
            index.add(fp)
    assert 0 < len(index) < len(prints)


@pytest.mark.slow  # grammar expansions, 7 s of CPU (a loaded machine): CI's slow step runs it
def test_the_count_is_what_the_grammar_makes():
    """The cost model counts candidates without making them; the count must be exact."""
    X = {"H": np.array([1.0, 4, 16, 64] * 5), "omega": np.repeat([0.0, 1, 3, 7, 15], 4)}
    tied = Grammar(terms=3, max_constants=6, max_nonlinear=3, tie_exponents=True)
    for g in (Grammar(), Grammar(terms=3, max_constants=6), Grammar(max_nonlinear=3), tied):
        made = generate(g, X)
        counted = count_candidates(g, X)
        by = {}
        for c in made:
            by[(c.n_constants, c.n_nonlinear)] = by.get((c.n_constants, c.n_nonlinear), 0) + 1
        assert by == counted


def test_repeated_grammar_entries_are_collapsed(tmp_path):
    """Audit case: a factors list repeating one kind 100,000 times reached 8.25 GiB (issue 31,
    serious 2): repeats are one entry."""
    g = Grammar(factors=["power"] * 100_000, variables=["H", "H", "omega"])
    assert g.factors == ("power",) and g.variables == ("H", "omega")
    p = tmp_path / "g.toml"
    p.write_text("factors = [" + ", ".join(['"log"'] * 100_000) + "]\n")
    assert load_grammar(p).factors == ("log",)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(factors=None), "factors: must be a list of names, got None"),
        (dict(variables=5), "variables: must be a list of names, got 5"),
        (dict(levels={"H": 1}), "levels: must be a list of names"),
    ],
)
def test_grammar_fields_of_the_wrong_kind(kwargs, match):
    """Audit cases: fr.Grammar(factors=None), fr.Grammar(variables=5) raised TypeError; a
    grammar file's ``levels = { H = 1 }`` was read as ["H"] (issue 31)."""
    with pytest.raises(FormError, match=match):
        Grammar(**kwargs)


def test_tied_exponents_share_one_constant_over_the_ranges_both_allow():
    """Issue 41: with tie_exponents, each set of terms with two or more power factors is also
    proposed with one exponent (Gadre et al.'s E + A*N**-b + B*D**-b): one nonlinear constant,
    a constant fewer than the untied form, bounded where every factor's range allows; without
    it, no tied form."""
    X = {"N": np.repeat([1e8, 1e9, 1e10], 3), "D": np.tile([1e9, 1e10, 1e11], 3),
         "omega": np.tile([0.0, 1.0, 3.0], 3)}  # fmt: skip
    g = Grammar(terms=2, max_constants=4, factors=("power",), interactions=1)
    assert not [c for c in generate(g, X) if "tied" in c.key]
    tied = {c.expression: c for c in generate(replace(g, tie_exponents=True), X)
            if "tied" in c.key}  # fmt: skip
    c = tied["L0 + a1*(N/1e9)**e1 + a2*(D/1e10)**e1"]
    assert (c.n_constants, c.n_nonlinear) == (4, 1)
    assert c.form.bounds == {"e1": EXPONENT_RANGE}
    # omega has zeros: its exponents stay positive, so the tied one does too
    assert tied["L0 + a1*(N/1e9)**e1 + a2*omega**e1"].form.bounds == {"e1": ZERO_EXPONENT_RANGE}
    assert len(tied) == 3  # the pairs of the three variables' power factors


def test_a_hill_term_is_a_scale_and_a_steepness_of_a_positive_variable_alone():
    """Issue 41: ``hill`` proposes ``a/(1 + (v/s)**h)`` (Lin et al.'s rectified SFT law
    ``B/(Dl + D**beta)`` rewritten; the Hill curve of SLDBench's best SFT law): two nonlinear
    constants, the scale over the levels' range widened as a saturating factor's, alone in its
    term, never of a variable with zeros, counted as it is made, and not proposed unless asked."""
    X = {"N": np.repeat([1e8, 1e9, 1e10], 3), "omega": np.tile([0.0, 1.0, 3.0], 3)}
    assert "hill" not in Grammar().factors
    g = Grammar(terms=2, max_constants=6, factors=("hill", "power", "log"), tie_exponents=True)
    made = generate(g, X)
    hill = {c.expression: c for c in made if "hill" in c.key}
    c = hill["L0 + a1/(1 + (N/s1)**h1)"]
    assert (c.n_constants, c.n_nonlinear) == (4, 2)
    assert c.form.bounds == {"s1": (1e7, 1e11), "h1": HILL_EXPONENT_RANGE}
    assert not [k for k in (c.key for c in made) if "hill(omega)" in k or "*hill" in k]
    # a power factor beside it keeps its own exponent when exponents are tied
    assert "L0 + a1/(1 + (N/s1)**h1) + a2*omega**e1" in hill
    by: dict = {}
    for c in made:
        by[(c.n_constants, c.n_nonlinear)] = by.get((c.n_constants, c.n_nonlinear), 0) + 1
    assert by == count_candidates(g, X)


def test_a_hill_candidate_recovers_the_curve_it_was_drawn_from():
    """The grammar's Hill term, fitted by the plain route on a noise-free rectified curve
    (11 levels of D, as the SFT grid's training runs), finds its scale and steepness."""
    import pandas as pd

    import fitrules as fr

    D = 200.0 * 2.0 ** np.arange(11)
    loss = 2.1 + 1.8 / (1 + (D / 3000.0) ** 0.6)
    grid = fr.load_grid(pd.DataFrame({"D": D, "loss": loss}), metric="loss")
    (c,) = [c for c in generate(Grammar(terms=1, factors=("hill",)), {"D": D})]
    f = fr.fit(grid, c.form, objective="abs_ls")
    assert f.constants["s1"] == pytest.approx(3000.0, rel=1e-3)
    assert f.constants["h1"] == pytest.approx(0.6, rel=1e-3)
    assert f.constants["L0"] == pytest.approx(2.1, rel=1e-4)


def test_interactions_default_to_products_of_two_for_two_variables_and_none_for_more():
    """Issue 41: with three or more variables the default grammar proposes sums of
    one-variable terms (product terms multiply the forms: the vocabulary grid's first budget
    held 37,883 with them); an explicit value is kept whatever the variables."""
    two = {"N": np.array([1e8, 1e9, 1e10]), "D": np.array([1e9, 1e10, 1e11])}
    three = {**two, "U": np.array([1e9, 3e9, 1e10])}
    g = Grammar(terms=2, max_constants=3, factors=("log",))
    assert g.interactions is None
    assert g.for_variables(2).interactions == 2 and g.for_variables(3).interactions == 1
    assert "L0 + a1*log(N/1e9)*log(D/1e10)" in [c.expression for c in generate(g, two)]
    assert not [c for c in generate(g, three) if ")*log(" in c.expression]
    assert [c for c in generate(replace(g, interactions=2), three) if ")*log(" in c.expression]
    for cols in (two, three):
        assert sum(count_candidates(g, cols).values()) == len(generate(g, cols))
    assert Grammar(interactions=3).for_variables(5).interactions == 3
