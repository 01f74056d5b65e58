"""The grammar `fitrules search` draws candidate forms from, and the pruning before fitting.

A candidate is an intercept plus a sum of up to ``terms`` terms; each term is a linear
constant times one *factor* of a variable, or times a product of factors of up to
``interactions`` different variables::

    L0 + a1*omega*(H/16)**e1          (one product term)
    L0 + a1*omega**e1 + a2*log(H/16)  (two terms)

The factors of a variable ``v`` with reference ``r`` (a power of 2 or of 10 near the
geometric centre of its positive levels, so constants stay well scaled):

=============  ===========================  ============================================
kind           positive v                   v with zeros (e.g. omega = 1/keep - 1)
=============  ===========================  ============================================
power          ``(v/r)**e``, e in [-3, 3]   ``v**e``, e in [0.1, 3]
linear         ``(v/r)``                    ``v``
inverse        ``(r/v)``                    (none: infinite at 0)
sqrt           ``(v/r)**0.5``               ``v**0.5``
log            ``log(v/r)``                 ``log(1 + v)``
saturating     ``v/(v + s)``, s over the levels' range widened 10x (alone in its term)
hill           ``1/(1 + (v/s)**h)``, s as     (none: no derivative in h at 0)
               saturating's, h in [0.1, 3]
               (alone in its term; only
               when asked)
=============  ===========================  ============================================

A variable with negative values has only the linear factor. ``levels`` adds, for each named
column, the variants whose intercept is one constant per level (``L0[COL]``). A form may
have at most ``max_constants`` constants, ``max_nonlinear`` of them nonlinear (exponents and
saturation scales, searched on a grid: their cost grows fast with their number).

The budget grows while it pays: a search first proposes the forms of at most
``first_constants`` constants, then those of one constant more at a time while the largest
budget so far still beat the one before it by more than a standard error (the front was
still falling there), up to ``max_constants`` (7 by default, with 3 nonlinear constants:
the vocabulary law of Tao et al. 2024, ``E + A1*N_nv**-a1 + A2*N_v**-a2 + A3*D**-a3``, has
7 and 3). With ``first_constants`` at ``max_constants`` every budget is searched at once.

A Hill term ``a/(1 + (v/s)**h)`` is a logistic curve in ``log v``, flat at both ends: Lin
et al. 2024's rectified law of fine-tuning loss in data, ``B/(Dl + D**beta) + E``, is one
(``a = B/Dl``, ``s = Dl**(1/beta)``, ``h = beta``), as is the form SLDBench's best agent
found for that task, ``c + A/(1 + (D/D0)**b)``; it is the one-break case of Caballero et al.
2022's broken neural scaling laws. Two nonlinear constants make it costly, so it is proposed
only when ``factors`` names it.

``tie_exponents`` adds, for each set of terms with two or more power factors, the variant
whose power factors share one exponent::

    L0 + a1*(N/1e9)**e1 + a2*(D/1e10)**e1   (4 constants, 1 exponent)

Gadre et al. 2024 ("Language models scale reliably with over-training and on downstream
tasks") write their law ``E + A*N**-b + B*D**-b`` so: one exponent for parameters and
tokens, which costs a constant less than two and is what a compute-optimal ratio that does
not drift with compute implies. The tied exponent ranges over the intersection of its
factors' ranges.

Before the nested fits, the search drops candidates the grid cannot tell apart: those with a
constant that has no effect on the grid's cells (:func:`structural_rank_ok`), and those that
are the same function on the grid's cells as a simpler candidate (the same fitted values on
the grid's values and on a perturbed copy of them: :data:`DUPLICATE_RTOL`).
"""

from __future__ import annotations

import itertools
import keyword
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np

from fitrules.base.errors import FormError, param
from fitrules.model.forms import Form

FACTOR_KINDS = ("power", "linear", "inverse", "sqrt", "log", "saturating", "hill")
# the kinds a grammar uses unless told: hill adds two nonlinear constants to every term it
# is in, and is proposed only when asked until the published-grid benchmark shows it pays
DEFAULT_FACTORS = ("power", "linear", "inverse", "sqrt", "log", "saturating")
EXPONENT_RANGE = (-3.0, 3.0)  # free exponents of a positive variable
ZERO_EXPONENT_RANGE = (0.1, 3.0)  # of a variable with zeros: 0**e must stay 0
# a saturation scale ranges over the levels' range widened this much
SATURATION_WIDEN = 10.0
HILL_EXPONENT_RANGE = (0.1, 3.0)  # a Hill curve's steepness; the other sign is 1 - the curve
DUPLICATE_RTOL = 1e-6  # fitted values this close (relative) on both probes: one function


@dataclass(frozen=True)
class Grammar:
    """What `fitrules search` may propose.

    Parameters
    ----------
    variables : sequence of str, optional
        Grid columns the forms may read (default: every varying numeric factor).
    terms : int, optional
        Largest number of terms besides the intercept (``--terms``, default 3).
    max_constants : int, optional
        Largest number of constants of a form, intercept included (default 7): the ceiling
        the budget grows to (see the module).
    max_nonlinear : int, optional
        Largest number of nonlinear constants (exponents, saturation scales; default 3).
    interactions : int, optional
        Largest number of variables in one product term. None (the default): 2 when the search
        reads one or two variables, 1 (additive forms) when it reads three or more (see
        :meth:`for_variables`).
    factors : sequence of str, optional
        The factor kinds used (see the module's table; default all six).
    levels : sequence of str, optional
        Columns whose per-level intercept ``L0[COL]`` is also proposed.
    tie_exponents : bool, optional
        Also propose each set of terms with two or more power factors with one exponent shared
        by them all (see the module).
    first_constants : int, optional
        The budget searched first (default 4); more constants are proposed only while they pay
        (see the module). At or above ``max_constants``: every budget at once.

    Raises
    ------
    FormError
        For a value outside what is allowed, naming the option.
    """

    variables: tuple[str, ...] | None = None
    terms: int = 3
    max_constants: int = 7
    max_nonlinear: int = 3
    interactions: int | None = None
    factors: tuple[str, ...] = DEFAULT_FACTORS
    levels: tuple[str, ...] = ()
    tie_exponents: bool = False
    first_constants: int = 4

    def __post_init__(self) -> None:
        for name, lo, hi in (
            ("terms", 1, 6),
            ("max_constants", 2, 12),
            ("max_nonlinear", 0, 3),
            ("interactions", 1, 3),
            ("first_constants", 2, 12),
        ):
            v = getattr(self, name)
            if v is None and name == "interactions":
                continue
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise FormError(
                    f"grammar {name.replace('_', '-')} {v!r}: must be an integer from {lo} to {hi}"
                )
        for name in ("variables", "factors", "levels"):
            v = getattr(self, name)
            if v is None and name == "variables":
                continue
            # a list or tuple only: a string is one name, a dict ({H = 1} in TOML) is not a list
            if not isinstance(v, list | tuple) or not all(isinstance(x, str) and x for x in v):
                raise FormError(f"grammar {name}: must be a list of names, got {_shown(v)}")
            # a name given twice is one name: repeats would only multiply the candidates
            object.__setattr__(self, name, tuple(dict.fromkeys(v)))
        unknown = [f for f in self.factors if f not in FACTOR_KINDS]
        if unknown or not self.factors:
            raise FormError(
                f"grammar factors {list(self.factors)!r}: allowed kinds are "
                f"{', '.join(FACTOR_KINDS)} (at least one)"
            )
        if self.variables is not None and not self.variables:
            raise FormError("grammar variables: name at least one column")
        if not isinstance(self.tie_exponents, bool):
            raise FormError(
                f"grammar tie-exponents {_shown(self.tie_exponents)}: must be true or false"
            )

    def describe(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def grows(self) -> bool:
        """Whether a search may propose more constants than it starts with."""
        return self.first_constants < self.max_constants

    def for_variables(self, n: int) -> Grammar:
        """This grammar for a search of ``n`` variables: ``interactions`` None becomes 2 for
        one or two variables, 1 for three or more.

        Product terms of ``r`` of ``V`` variables number C(V, r) times the factor kinds to
        the ``r``-th power: over the three variables of the vocabulary grid the default
        grammar's first budget (4 constants) holds 37,883 forms with products of two, 376
        without. The published
        laws of three or more variables the benchmark holds (Tao et al.'s vocabulary law,
        Muennighoff et al.'s data-constrained law, Ye et al.'s domain mixture) are sums of
        one-variable terms; those of two are not always (Clark et al.'s MoE law has
        ``log(N)*log(E)``).

        Parameters
        ----------
        n : int
            The number of variables the search reads.

        Returns
        -------
        Grammar
            This grammar, with ``interactions`` set.
        """
        if self.interactions is not None:
            return self
        return replace(self, interactions=2 if n <= 2 else 1)

    def first_step(self) -> Grammar:
        """The grammar of a search's first budgets: at most ``first_constants`` constants."""
        k = min(self.first_constants, self.max_constants)
        return replace(self, max_constants=k, first_constants=k)


def _shown(value) -> str:
    r = repr(value)
    return r if len(r) <= 60 else r[:28] + "..." + r[-28:]


def load_grammar(path: str | Path, **overrides) -> Grammar:
    """A :class:`Grammar` from a TOML file whose keys are its fields, e.g.::

        variables = ["H", "omega"]
        terms = 2
        factors = ["power", "log"]

    Keyword ``overrides`` that are not None replace the file's values.

    Raises
    ------
    FormError
        For a file that cannot be read or parsed, an unknown key or a bad value.
    """
    from fitrules.base.inputs import load_toml

    path = Path(path)
    # a pipe, a device, a huge file or arrays nested thousands deep are refused unread
    doc = load_toml(path, f"{param('grammar')} {path}", FormError)
    allowed = [f.name for f in fields(Grammar)]
    unknown = sorted(set(doc) - set(allowed))
    if unknown:
        raise FormError(
            f"{param('grammar')} {path}: unknown key(s) {unknown}; allowed: {', '.join(allowed)}"
        )
    doc.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return Grammar(**doc)
    except FormError as err:
        raise FormError(f"{param('grammar')} {path}: {err}") from None


# ------------------------------------------------------------------------------ variables
@dataclass(frozen=True)
class VariableInfo:
    """How a variable may enter a form: its reference and which factors it allows."""

    name: str
    reference: float
    has_zero: bool
    negative: bool
    lo: float  # smallest and largest positive level
    hi: float

    @classmethod
    def of(cls, name: str, values: np.ndarray) -> VariableInfo:
        v = np.unique(np.asarray(values, float))
        pos = v[v > 0]
        negative = bool((v < 0).any())
        lo, hi = (float(pos.min()), float(pos.max())) if len(pos) else (1.0, 1.0)
        has_zero = bool((v == 0).any())
        return cls(name, _reference(pos) if not has_zero else 1.0, has_zero, negative, lo, hi)

    def allows(self, kind: str) -> bool:
        if self.negative:
            return kind == "linear"
        if kind == "inverse":
            return not self.has_zero
        if kind == "saturating":
            return self.hi > 0
        if kind == "hill":  # (0/s)**h has no derivative in h that is finite
            return self.hi > 0 and not self.has_zero
        return True


def _reference(pos: np.ndarray) -> float:
    """A power of 2 (when every level is one) or of 10 near the levels' geometric centre."""
    if not len(pos):
        return 1.0
    centre = float(np.exp(np.mean(np.log(np.unique(pos)))))
    log2 = np.log2(pos)
    if np.allclose(log2, np.round(log2)):
        return float(2.0 ** round(math.log2(centre)))
    return float(10.0 ** round(math.log10(centre)))


def _num(v: float) -> str:
    k = round(math.log10(v)) if v > 0 else 0
    if abs(k) >= 4 and v == 10.0**k:
        return f"1e{k}"  # (N/1e9), not (N/1000000000)
    return f"{v:.15g}"


def _ident(name: str) -> str:
    """A column's name as an expression reads it: in backticks unless it is a plain
    identifier (``H-1`` is ```H-1```, not H minus 1)."""
    if name.isidentifier() and not keyword.iskeyword(name) and name not in ("log", "exp", "sqrt"):
        return name
    return f"`{name}`"


def _scaled(info: VariableInfo) -> str:
    """``v`` or ``(v/r)``."""
    v = _ident(info.name)
    return v if info.reference == 1 else f"({v}/{_num(info.reference)})"


# ------------------------------------------------------------------------------ factors
@dataclass(frozen=True)
class Factor:
    variable: str
    kind: str

    def render(self, info: VariableInfo, constant: str | None, second: str | None = None) -> str:
        x, v = _scaled(info), _ident(info.name)
        if self.kind == "power":
            return f"{x}**{constant}"
        if self.kind == "linear":
            return x
        if self.kind == "inverse":
            return f"({_num(info.reference)}/{v})" if info.reference != 1 else f"(1/{v})"
        if self.kind == "sqrt":
            return f"{x}**0.5"
        if self.kind == "log":
            if info.has_zero:
                return f"log(1 + {v})"
            return f"log({x[1:-1] if x.startswith('(') and x.endswith(')') else x})"
        if self.kind == "saturating":
            return f"{v}/({v} + {constant})"
        if self.kind == "hill":
            return f"1/(1 + ({v}/{constant})**{second})"
        raise AssertionError(self.kind)

    @property
    def nonlinear(self) -> int:
        return {"power": 1, "saturating": 1, "hill": 2}.get(self.kind, 0)

    def bounds(self, info: VariableInfo) -> tuple[float, float]:
        if self.kind == "power":
            return ZERO_EXPONENT_RANGE if info.has_zero else EXPONENT_RANGE
        return (info.lo / SATURATION_WIDEN, info.hi * SATURATION_WIDEN)


Term = tuple[Factor, ...]  # factors of distinct variables, in the variables' order
_ALONE = ("saturating", "hill")  # kinds that are a term by themselves, never in a product


@dataclass(frozen=True)
class Candidate:
    """One proposed form, with the grammar's description of it."""

    key: str  # canonical description: terms joined by ' + ', factors by '*'
    form: Form
    n_constants: int
    n_nonlinear: int
    n_terms: int

    @property
    def expression(self) -> str:
        return self.form.expression


def _terms(grammar: Grammar, infos: Sequence[VariableInfo]) -> list[Term]:
    grammar = grammar.for_variables(len(infos))
    single: list[Term] = [
        (Factor(i.name, k),) for i in infos for k in grammar.factors if i.allows(k)
    ]
    out = list(single)
    for r in range(2, grammar.interactions + 1):
        for group in itertools.combinations(infos, r):
            choices = [
                [Factor(i.name, k) for k in grammar.factors if k not in _ALONE and i.allows(k)]
                for i in group
            ]
            out += [tuple(p) for p in itertools.product(*choices)]
    return out


def _term_key(t: Term) -> str:
    return "*".join(f"{f.kind}({f.variable})" for f in t)


def generate(
    grammar: Grammar,
    columns: Mapping[str, np.ndarray],
    level_counts: Mapping[str, int] | None = None,
    only_constants: int | None = None,
) -> list[Candidate]:
    """Every candidate of ``grammar`` over the cells' variable values ``columns``.

    ``level_counts`` gives the number of levels of each ``grammar.levels`` column;
    ``only_constants``, those with exactly that many constants (a step of a growing budget).
    The order is canonical: fewer constants first, then fewer terms, then the key.
    """
    infos = [VariableInfo.of(v, columns[v]) for v in columns]
    by_name = {i.name: i for i in infos}
    terms = _terms(grammar, infos)
    intercepts = [("L0", 1)] + [(f"L0[{c}]", int((level_counts or {})[c])) for c in grammar.levels]
    out: list[Candidate] = []
    for n in range(1, grammar.terms + 1):
        for combo in itertools.combinations(terms, n):
            powers = sum(f.kind == "power" for t in combo for f in t)
            nonlinear = sum(f.nonlinear for t in combo for f in t)
            variants = [(nonlinear, False)]
            if grammar.tie_exponents and powers >= 2:
                variants.append((nonlinear - powers + 1, True))
            for q, tied in variants:
                if q > grammar.max_nonlinear:
                    continue
                for intercept, k0 in intercepts:
                    n_const = k0 + n + q
                    if n_const <= grammar.max_constants and only_constants in (None, n_const):
                        out.append(_candidate(combo, intercept, k0, n_const, q, by_name, tied))
    out.sort(key=lambda c: (c.n_constants, c.n_terms, c.key))
    return out


def count_candidates(
    grammar: Grammar,
    columns: Mapping[str, np.ndarray],
    level_counts: Mapping[str, int] | None = None,
    only_constants: int | None = None,
) -> dict[tuple[int, int], int]:
    """How many candidates :func:`generate` would return (with ``only_constants``, those
    of that many constants), by (constants, nonlinear constants), counted without making
    any: the cost of a search is known before it starts.

    The terms are listed (a few thousand at most); the sets of ``n`` distinct terms with ``q``
    nonlinear constants are counted by a product of generating polynomials, one factor
    ``(1 + x y**c)`` per term of ``c`` nonlinear constants.
    """
    infos = [VariableInfo.of(v, columns[v]) for v in columns]
    grammar = grammar.for_variables(len(infos))
    terms = _terms(grammar, infos)
    T, Q = grammar.terms, grammar.max_nonlinear
    # ways[n][p][s]: sets of n terms with p power factors and s other nonlinear constants
    # (saturation scales, a Hill curve's scale and steepness); tied
    # variants have many powers and one exponent, so p runs past Q
    P = T * grammar.interactions
    ways = np.zeros((T + 1, P + 1, Q + 1), dtype=object)
    ways[0, 0, 0] = 1
    for term in terms:
        p = sum(f.kind == "power" for f in term)
        c = sum(f.nonlinear for f in term if f.kind != "power")
        if c > Q:
            continue
        for n in range(T, 0, -1):
            ways[n, p:, c:] += ways[n - 1, : P + 1 - p, : Q + 1 - c]
    k0s = [1] + [int((level_counts or {})[c]) for c in grammar.levels]
    out: dict[tuple[int, int], int] = {}
    for n, p, c in zip(*np.nonzero(ways), strict=True):
        if n == 0:
            continue
        qs = [p + c] + ([c + 1] if grammar.tie_exponents and p >= 2 else [])
        for q in qs:
            for k0 in k0s:
                k = int(k0 + n + q)
                if q <= Q and k <= grammar.max_constants and only_constants in (None, k):
                    out[(k, int(q))] = out.get((k, int(q)), 0) + int(ways[n, p, c])
    return out


def pilot_candidate(
    grammar: Grammar, columns: Mapping[str, np.ndarray], n_nonlinear: int
) -> Candidate | None:
    """One candidate of ``grammar`` with ``n_nonlinear`` nonlinear constants (the fewest
    terms that reach it), to time fits of that cost before the search; None if none has."""
    infos = [VariableInfo.of(v, columns[v]) for v in columns]
    by_name = {i.name: i for i in infos}
    terms = _terms(grammar, infos)
    chosen: list[Term] = []
    left = n_nonlinear
    for term in sorted(terms, key=lambda t: -sum(f.nonlinear for f in t)):
        c = sum(f.nonlinear for f in term)
        if (0 < c <= left) or (left == 0 and c == 0 and not chosen):
            chosen.append(term)
            left -= c
        if left == 0 and chosen:
            break
    if left or not chosen:
        return None
    return _candidate(tuple(chosen), "L0", 1, 1 + len(chosen) + n_nonlinear, n_nonlinear, by_name)


def _candidate(combo, intercept, k0, n_const, nonlinear, infos, tied=False) -> Candidate:
    pieces, bounds, starts, variables = [intercept], {}, {}, []
    e = s = 0
    for j, term in enumerate(combo, 1):
        factors = []
        for f in term:
            info = infos[f.variable]
            variables.append(f.variable)
            constant = None
            if f.kind == "power":
                e = 1 if tied else e + 1
                constant = f"e{e}"
            elif f.kind in _ALONE:
                s += 1
                constant = f"s{s}"
            if f.kind == "hill":  # a scale (as a saturating factor's) and a steepness h
                bounds[constant] = starts[constant] = f.bounds(info)
                bounds[f"h{s}"] = starts[f"h{s}"] = HILL_EXPONENT_RANGE
                factors.append(f.render(info, constant, f"h{s}"))
                continue
            if constant:
                lo, hi = f.bounds(info)
                if constant in bounds:  # a tied exponent: the range its factors share
                    lo, hi = max(lo, bounds[constant][0]), min(hi, bounds[constant][1])
                bounds[constant] = (lo, hi)
                starts[constant] = (lo, hi)
            factors.append(f.render(info, constant))
        body = "*".join(factors)
        # a Hill term reads a1/(1 + ...), not a1*1/(1 + ...)
        pieces.append(f"a{j}/" + body[2:] if body.startswith("1/") else f"a{j}*" + body)
    key = " + ".join([intercept.replace("L0", "const")] + sorted(_term_key(t) for t in combo))
    key += " (tied exponents)" if tied else ""
    expression = " + ".join(pieces)
    form = Form(
        "candidate",  # named by its place in the canonical order (see named)
        expression,
        tuple(dict.fromkeys(variables)),
        bounds=bounds,
        start=starts,
        source="fitrules search",
    )
    return Candidate(key, form, n_const, nonlinear, len(combo))


def named(
    candidates: Sequence[Candidate], start: int = 1, total: int | None = None
) -> list[Candidate]:
    """The candidates with stable names ``s0001``, ``s0002``... in their canonical order,
    from ``start``; the digits fit ``total`` candidates (default: these), so a budget that
    grows names its first forms as a search of every budget at once would."""
    width = max(4, len(str(total if total is not None else start - 1 + len(candidates))))
    return [
        replace(c, form=replace(c.form, name=f"s{i:0{width}d}"))
        for i, c in enumerate(candidates, start)
    ]


# ------------------------------------------------------------------------------ pruning
def structural_rank_ok(form: Form, X: Mapping[str, np.ndarray], rng: np.random.Generator) -> bool:
    """Whether every constant of ``form`` moves the predictions at the cells ``X``.

    The Jacobian over the cells at two random points of the constants' starting ranges has
    full column rank at either: a rank that is short at random points is short everywhere
    but on a set of measure zero, so the form cannot be identified from these cells.
    """
    from fitrules.model.compiled import CompiledForm

    cf = CompiledForm(form)
    s = cf.s
    n = len(next(iter(X.values())))
    if cf.p > n:
        return False
    for _ in range(2):
        params = rng.normal(size=cf.p)
        for j, c in enumerate(s.nonlinear):
            i = s.constants.index(c)
            params[i] = rng.uniform(s.start_lo[j], s.start_hi[j])
        with np.errstate(all="ignore"):
            J = cf.jacobian(dict(X), params[None, :])[0]
        if not np.isfinite(J).all():
            continue
        norms = np.linalg.norm(J, axis=0)
        if (norms == 0).any():
            continue
        sv = np.linalg.svd(J / norms, compute_uv=False)
        if sv[-1] > 1e-8 * sv[0]:
            return True
    return False


class TwinIndex:
    """Fingerprints kept so far, and for a new one the first kept within ``rtol`` of it in
    every coordinate (a twin: the same function on the grid's cells).

    Each fingerprint is filed under the buckets, ``2 * rtol`` wide, of the means of its two
    halves: a twin's means differ by at most ``rtol`` each, so it sits in the same or a
    neighbouring bucket of both, and only those are compared in full. The same answers as
    comparing with every kept fingerprint, which is quadratic in the candidates: on 40,000
    candidates that scan took most of a search's time."""

    def __init__(self, rtol: float = DUPLICATE_RTOL) -> None:
        self.rtol = float(rtol)
        self._width = 2.0 * self.rtol
        self._prints: np.ndarray | None = None
        self._n = 0
        self._buckets: dict[object, list[int]] = {}

    def __len__(self) -> int:
        return self._n

    def _key(self, fp: np.ndarray) -> tuple[int, int] | None:
        half = (len(fp) + 1) // 2
        q = [float(np.mean(part)) / self._width for part in (fp[:half], fp[-half:])]
        if not all(math.isfinite(v) for v in q):
            return None  # means too large to bucket: one shared bucket
        return math.floor(q[0]), math.floor(q[1])

    def _near(self, key: tuple[int, int] | None) -> list[int]:
        if key is None:
            return list(self._buckets.get(None, ()))
        a, b = key
        return [j for da in (-1, 0, 1) for db in (-1, 0, 1)
                for j in self._buckets.get((a + da, b + db), ())]  # fmt: skip

    def twin(self, fp: np.ndarray) -> int | None:
        """The position (in the order added) of the first kept fingerprint within ``rtol``
        of ``fp`` in every coordinate, or None."""
        fp = np.asarray(fp, float).ravel()
        near = self._near(self._key(fp))
        if not near or self._prints is None:
            return None
        near = np.sort(np.array(near))
        hit = (np.abs(self._prints[near] - fp) <= self.rtol).all(axis=1)
        return int(near[np.argmax(hit)]) if hit.any() else None

    def add(self, fp: np.ndarray) -> int:
        """Keep ``fp``; its position."""
        fp = np.asarray(fp, float).ravel()
        if self._prints is None:
            self._prints = np.empty((16, len(fp)))
        elif self._n == len(self._prints):  # grown by doubling: amortised constant time
            self._prints = np.concatenate([self._prints, np.empty_like(self._prints)])
        self._prints[self._n] = fp
        self._buckets.setdefault(self._key(fp), []).append(self._n)
        self._n += 1
        return self._n - 1
