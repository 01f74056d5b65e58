"""Expressions (fitrules.model.expr): what the parser refuses, evaluation, derivatives,
unparsing."""

import numpy as np
import pytest
from hypothesis import given, settings

import fuzzing
from conftest import composition_grid
from fitrules.base.errors import ExpressionError
from fitrules.model import expr as ex
from fitrules.model.compiled import CompiledForm
from fitrules.model.forms import BUILTIN_FORMS


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


# ------------------------------------------------------------------ generated code
def _env(names, rng, lead=()):
    """Each name on values of both signs, zero and large ones (NaN and inf paths too)."""
    pool = np.array([0.0, -1.5, 0.3, 1.0, 2.0, 7.5, 16.0, 1e5, -3e-3, 64.0])
    return {n: rng.choice(pool, size=(*lead, 10)) for n in names}


def _same(a, b) -> None:
    a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
    np.testing.assert_array_equal(a, b)  # bit for bit, NaN where NaN


@pytest.mark.parametrize("name", sorted(BUILTIN_FORMS))
def test_compiled_form_equals_the_tree_walk_on_builtin_forms(name):
    """A built-in form's generated code gives the tree walk's value, Jacobian and projection
    pieces bit for bit, for a batch of constants."""
    rng = np.random.default_rng(0)
    runs = composition_grid().assign(M=lambda t: t["H"] / 2, outer_lr=0.7)
    form = BUILTIN_FORMS[name].bind(list(runs.columns), runs)
    cf = CompiledForm(form)
    X = {v: rng.choice(runs[v].unique(), 12) for v in form.bound_variables}
    P = rng.normal(size=(5, cf.p))
    env = cf.env(X, P)
    with np.errstate(all="ignore"):
        _same(cf.predict(X, P), ex.evaluate(form.tree, env))
        J = cf.jacobian(X, P)
        for j, g in enumerate(cf.s.gradient):
            _same(J[..., j], ex.evaluate(g, env))
        for got, node in zip(cf.pieces(env), (*cf.s.basis, cf.s.offset), strict=True):
            _same(got, ex.evaluate(node, env))


@settings(max_examples=300, deadline=None, derandomize=True)  # the same cases on every run
@given(text=fuzzing.valid_expressions)
def test_compiled_code_equals_the_tree_walk_on_random_expressions(text):
    """For any expression of the forms' grammar (tests/fuzzing.py), the generated code of it
    and of its derivatives gives the tree walk's values bit for bit."""
    tree = ex.parse(text)
    names = ex.names(tree)
    nodes = [tree] + [ex.diff(tree, n) for n in names]
    env = _env(names, np.random.default_rng(len(text)), lead=(3, 1))
    with np.errstate(all="ignore"):
        want = [ex.evaluate(n, env) for n in nodes]
        got = ex.compile_nodes(nodes)(env)
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        _same(a, b)
