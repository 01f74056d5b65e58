"""The golden files: each result class's text, HTML and JSON for one small example, as
committed under tests/golden/ (issue 45). A difference fails with its unified diff; a change
made on purpose is regenerated with `python -m tools.golden` and reviewed as that diff."""

from __future__ import annotations

import json

import pytest

from tools import golden

# one line per example: the behaviour its golden files pin
DOCS = {
    "compare": "fr.compare's Comparison of two forms on 40 splits renders as committed.",
    "fit": "fr.fit's FittedForm with bootstrap intervals renders as committed.",
    "fit_profile": "fr.fit's FittedForm with profile-likelihood intervals renders as committed.",
    "prediction": "FittedForm.predict's Prediction at one configuration renders as committed.",
    "ci": "fr.ci's PairedIntervals of two tuned arms renders as committed.",
    "tune": "fr.tune's Tuning of lr, cross-fitted, renders as committed.",
    "validate": "fr.validate's Validation of the main grid renders as committed.",
    "design": "fr.design's Design of a six-run batch renders as committed.",
    "search": "fr.search's Search at one term renders as committed.",
    "allocate": "fr.allocate's Allocation of three budgets renders as committed.",
    "predict": "fr.predict's LedgerEntry renders as committed, its hashes and time masked.",
    "score": "fr.score's Scores of one record renders as committed.",
    "verify_ledger": "fr.verify_ledger's LedgerCheck renders as committed, its hashes masked.",
}


@pytest.mark.parametrize("name", list(golden.EXAMPLES))
def test_result_renders_as_its_golden_files(name):
    """Each example's text, HTML and JSON equal its golden files (DOCS says what each pins)."""
    result, views = golden.build(name)
    assert type(result).__name__ == golden.EXAMPLES[name][0]
    diff = golden.diff(name, views)
    assert not diff, (
        f"{DOCS[name]} It differs from its golden files (`python -m tools.golden {name}` "
        "rewrites them; review the diff):\n" + "".join(diff)
    )


def test_every_example_has_a_docstring():
    """Each golden example says in one line which behaviour it pins."""
    assert set(DOCS) == set(golden.EXAMPLES)


def test_every_result_class_has_a_golden_example():
    """A result class added to the package without a golden example fails this test."""
    covered = {cls for cls, _ in golden.EXAMPLES.values()}
    assert golden.result_classes() == covered


def test_json_numbers_compare_to_what_the_methods_promise():
    """Floats (and hexadecimal floats) within ``REL``/``ABS`` are equal, so another machine's
    BLAS passes; a difference a method could make, an integer, a type or a key does not."""
    base = {"x": 2.5, "hex": (2.5).hex(), "n": 3, "tiny": 1.4e-13, "s": "a", "l": [1.0]}
    drifted = dict(base, x=2.5 * (1 + 3e-5), hex=(2.5 * (1 + 3e-5)).hex(), tiny=1.3e-13)
    assert golden.same("json", json.dumps(base), json.dumps(drifted))
    for change in ({"x": 2.5 * (1 + 1e-3)}, {"hex": (2.5 * (1 + 1e-3)).hex()}, {"n": 4},
                   {"n": 3.0}, {"s": "b"}, {"l": [1.0, 2.0]}, {"tiny": 1e-9}):  # fmt: skip
        assert not golden.same("json", json.dumps(base), json.dumps({**base, **change})), change
    assert not golden.same("json", json.dumps(base), json.dumps({**base, "extra": 1}))
    assert not golden.same("txt", "2.5000000\n", "2.5000001\n")  # text is what a reader sees
