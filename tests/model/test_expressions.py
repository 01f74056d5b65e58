"""Expressions (fitrules.model.expr): what the parser refuses, evaluation, derivatives,
unparsing."""

import numpy as np
import pytest

from fitrules.base.errors import ExpressionError
from fitrules.model import expr as ex


@pytest.mark.parametrize(
    "text",
    [
        '__import__("os").system("true")',
        "a.b",
        "x[0]",
        "lambda: 1",
        "f(x)",
        "log(x, 2)",
        "a if b else c",
        "[1, 2]",
        "a == b",
        '"text"',
        "a +",
        "",
        "x @ y",
        "a and b",
        "`unclosed",
    ],
)
def test_unsafe_or_unparsable_is_refused(text):
    """Attributes, calls, comparisons, strings and broken syntax are refused as expressions."""
    with pytest.raises(ExpressionError):
        ex.parse(text)


def test_where_grammar_allows_comparisons_and_strings():
    """A where filter may compare, combine with and, quote strings and backquote column names."""
    node = ex.parse("lr == 3e-4 and `model size` > 2 and algo != 'sync'", logical=True)
    assert ex.names(node) == ["lr", "model size", "algo"]
    env = {
        "lr": np.array([3e-4, 1e-3]),
        "model size": np.array([3, 3]),
        "algo": np.array(["diloco", "diloco"]),
    }
    assert ex.evaluate(node, env).tolist() == [True, False]


def test_evaluate_matches_python():
    """An expression evaluates to what the same arithmetic gives in Python."""
    node = ex.parse("L0 + a*omega**c + b*(H/16)**d - sqrt(x)/exp(-y) + log(z)")
    env = dict(L0=2.0, a=0.5, omega=3.0, c=0.7, b=0.1, H=4.0, d=0.3, x=2.0, y=0.5, z=1.5)
    want = 2.0 + 0.5 * 3.0**0.7 + 0.1 * (4 / 16) ** 0.3 - np.sqrt(2.0) / np.exp(-0.5) + np.log(1.5)
    assert ex.evaluate(node, env) == pytest.approx(want, rel=1e-14)


@pytest.mark.parametrize(
    "text",
    [
        "L0 + a*omega*(H/16)**b",
        "L0 + a*omega**c + b*(H/16)**d",
        "E + A/N**alpha + B/D**beta",
        "a*exp(-k*x) + sqrt(c + x**2)",
        "log(a + b*x) / (c - x)",
        "-a**2 * x / (1 + b)",
    ],
)
def test_derivatives_match_finite_differences(text):
    """The symbolic derivative in every name matches a central finite difference."""
    node = ex.parse(text)
    rng = np.random.default_rng(1)
    env = {n: rng.uniform(0.5, 2.0) for n in ex.names(node)}
    for name in env:
        h = 1e-6 * max(1.0, abs(env[name]))
        up, down = dict(env), dict(env)
        up[name] += h
        down[name] -= h
        fd = (ex.evaluate(node, up) - ex.evaluate(node, down)) / (2 * h)
        assert ex.evaluate(ex.diff(node, name), env) == pytest.approx(fd, rel=1e-6, abs=1e-9)


def test_power_derivative_is_finite_at_zero_base():
    """The derivative of omega**c in c is 0 at omega = 0, not nan."""
    # d/dc of a*omega**c at omega = 0 is 0 (for c > 0), not 0*log(0) = nan
    node = ex.diff(ex.parse("a*omega**c"), "c")
    out = ex.evaluate(node, {"a": 1.0, "omega": np.array([0.0, 2.0]), "c": 0.5})
    assert out.tolist() == pytest.approx([0.0, 2**0.5 * np.log(2)])


@pytest.mark.parametrize(
    "text", ["a - (b - c)", "a/(b*c)", "(a**b)**c", "a**(b**c)", "-(a + b)", "2**-x", "(a - b)*c"]
)
def test_unparse_round_trips(text):
    """Unparsing then parsing again keeps the value, with signs and powers grouped right."""
    node = ex.parse(text)
    again = ex.parse(ex.unparse(node))
    env = {"a": 1.3, "b": 0.7, "c": 2.1, "x": 0.4}
    assert ex.evaluate(again, env) == pytest.approx(ex.evaluate(node, env), rel=1e-14)


def test_terms_split_signs():
    """An expression splits into its terms with their signs, brackets opened."""
    parts = ex.terms(ex.parse("a - b*x + (c - d)"))
    assert [(s, ex.unparse(t)) for s, t in parts] == [
        (1.0, "a"),
        (-1.0, "b*x"),
        (1.0, "c"),
        (-1.0, "d"),
    ]
