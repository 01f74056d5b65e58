"""fitrules.sim.theory: exact stationary losses, their closed forms, the stability limit, and
the theory forms fitted to exact values."""

import math
from dataclasses import asdict

import numpy as np
import pandas as pd
import pytest

import fitrules as fr
from fitrules.base.errors import TheoryError
from fitrules.sim import quadratic
from fitrules.sim import theory as th


def closed_form_h1(lr, s, V, omega, N):
    """The compressed-sync result as the issue states it."""
    return lr * V * (1 + omega) / (N * s * ((2 - lr * s) - lr * s * omega / N))


def _exact_grid(M=16, lr=0.05, eta=1.0, H_levels=(1, 2, 4, 8, 16, 32, 64), keeps=None):
    keeps = keeps or (1.0, 0.5, 0.25, 0.125, 0.0625)
    rows = []
    for H in H_levels:
        for keep in keeps:
            omega = 1 / keep - 1
            loss = th.stationary_loss(1.0, lr=lr, noise=1.0, H=H, M=M, omega=omega, outer_lr=eta)
            for seed in range(2):  # two identical "seeds": exact values, no noise
                rows.append({"H": H, "omega": omega, "M": M, "outer_lr": eta, "seed": seed,
                             "loss": 100 * loss})  # fmt: skip
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    "lr, s, omega, N",
    [
        (0.1, 1.0, 0.0, 1),
        (0.1, 1.0, 3.0, 16),
        (0.2, 0.5, 99.0, 256),
        (0.02, 2.0, 15.0, 4),
        (1.0, 1.0, 1.0, 8),
    ],  # fmt: skip
)
def test_h1_closed_form_is_the_fixed_point(lr, s, omega, N):
    """At H=1 the stationary variance is the compressed-sync closed form by every route."""
    v = th.stationary_variance(s, lr=lr, noise=0.7, M=N, omega=omega)[0]
    assert v == pytest.approx(closed_form_h1(lr, s, 0.7, omega, N), rel=1e-10)
    assert th.compressed_sync_variance(lr, s, 0.7, omega, N) == pytest.approx(v, rel=1e-10)
    assert th.mode_covariance(s, lr=lr, noise=0.7, M=N, omega=omega)[0, 0] == pytest.approx(
        v, rel=1e-8
    )


@pytest.mark.parametrize("H", [1, 3, 16])
@pytest.mark.parametrize("eta", [1.0, 0.6])
@pytest.mark.parametrize("masks", ["independent", "shared"])
def test_no_momentum_closed_form_for_any_h_and_outer_step(H, eta, masks):
    """Without momentum the variance matches local SGD's closed form and the Lyapunov solution."""
    v = th.stationary_variance(0.4, lr=0.1, noise=2.0, H=H, M=8, omega=3.0, outer_lr=eta,
                               masks=masks)[0]  # fmt: skip
    if masks == "independent":
        assert th.local_sgd_variance(0.1, 0.4, 2.0, 3.0, 8, H, eta) == pytest.approx(v, rel=1e-9)
    # the Lyapunov route (scipy) agrees with the vectorised fixed point
    S = th.mode_covariance(0.4, lr=0.1, noise=2.0, H=H, M=8, omega=3.0, outer_lr=eta,
                           masks=masks)  # fmt: skip
    assert S[0, 0] == pytest.approx(v, rel=1e-8)


@pytest.mark.parametrize("nesterov", [True, False])
def test_momentum_fixed_point_matches_the_lyapunov_route_and_iterating(nesterov):
    """With outer momentum the fixed point equals the Lyapunov solution and the iterated loss."""
    kw = dict(lr=0.05, noise=1.0, H=4, M=8, omega=3.0, outer_lr=0.7, outer_momentum=0.6,
              nesterov=nesterov)  # fmt: skip
    v = th.stationary_variance(0.5, **kw)[0]
    assert th.mode_covariance(0.5, **kw)[0, 0] == pytest.approx(v, rel=1e-8)
    # iterating the second-moment recursion long enough reaches the same value
    curve = th.loss_curve(0.5, 4000, **kw)
    assert curve[-1] == pytest.approx(0.5 * 0.5 * v, rel=1e-9)


def test_loss_curve_first_round_by_hand():
    """The loss curve's first round equals the second moment worked out by hand."""
    # x0 = 2, no momentum, H = 1: E x1^2 = ((1-r)^2 + kappa r^2) x0^2 + sigma2
    lr, s, V, omega, M = 0.1, 1.0, 1.0, 3.0, 4
    r = lr * s
    expected = ((1 - r) ** 2 + omega / M * r * r) * 4.0 + (1 + omega) * lr**2 * V / M
    got = th.loss_curve(s, 1, lr=lr, noise=V, M=M, omega=omega, init=2.0)[0]
    assert got == pytest.approx(0.5 * s * expected, rel=1e-12)


@pytest.mark.parametrize("M", [16, 64, 256])
def test_stability_limit_on_both_sides(M):
    """Just below the stable step the loss is finite; just above it is inf."""
    limit = th.stable_step(1.0, 99.0, M)
    assert limit == pytest.approx(2 / (1 + 99 / M))
    below = th.second_moment_radius(1.0, lr=limit * 0.999, M=M, omega=99.0)[0]
    above = th.second_moment_radius(1.0, lr=limit * 1.001, M=M, omega=99.0)[0]
    assert below < 1 < above
    assert math.isfinite(th.stationary_loss(1.0, lr=limit * 0.999, M=M, omega=99.0))
    assert th.stationary_loss(1.0, lr=limit * 1.001, M=M, omega=99.0) == math.inf
    assert th.compressed_sync_variance(limit * 1.001, 1.0, 1.0, 99.0, M) == math.inf


def test_more_workers_restore_the_step_but_not_the_floor():
    """More workers raise the stable step, but at small steps the variance stays 1 + omega times."""
    steps = [th.stable_step(1.0, 99.0, M) for M in (16, 256)]
    assert steps[1] / steps[0] == pytest.approx((1 + 99 / 16) / (1 + 99 / 256))
    # at lr -> 0 the variance relative to uncompressed tends to (1 + omega), whatever M
    for M in (16, 256, 4096):
        ratio = th.compressed_sync_variance(1e-6, 1.0, 1.0, 99.0, M) / th.compressed_sync_variance(
            1e-6, 1.0, 1.0, 0.0, M
        )
        assert ratio == pytest.approx(100.0, rel=1e-4)


def test_curvatures_are_the_harness_spectrum():
    """The theory's curvatures equal the quadratic harness's for every spectrum."""
    for kind in ("constant", "linear", "geometric"):
        np.testing.assert_array_equal(
            th.curvatures(kind, 37, 2.0, 8.0), quadratic.curvatures(kind, 37, 2.0, 8.0)
        )


def test_exact_loss_of_a_harness_config_sums_its_modes():
    """A harness config's exact loss is half the curvature-weighted sum of its mode variances."""
    cfg = quadratic.QuadConfig(dim=50, spectrum="geometric", condition=10.0, M=4, H=2,
                               keep=0.5, lr=0.1)  # fmt: skip
    s = quadratic.curvatures("geometric", 50, 1.0, 10.0)
    v = th.stationary_variance(s, lr=0.1, H=2, M=4, omega=1.0)
    assert th.exact_loss(asdict(cfg)) == pytest.approx(0.5 * float(s @ v), rel=1e-12)
    # a results row reads the same (nesterov as text, as a CSV gives it back)
    row = {**asdict(cfg), "nesterov": "True"}
    assert th.exact_loss(row) == th.exact_loss(asdict(cfg))


@pytest.mark.parametrize(
    "change, match",
    [
        ({"aggregator": "median"}, "exact only for the mean aggregator"),
        ({"compressor": "topk"}, "exact only for the mean aggregator"),
        ({"attackers": 2}, "exact only for the mean aggregator"),
        ({"keep": 0.0}, r"keep=0.0 is outside \(0, 1\]"),
        ({"spectrum": "flat"}, "spectrum='flat' is unknown"),
        # a misspelt name was read as rand-k (hostile review)
        ({"compressor": "Topk"}, "compressor='Topk' is unknown; allowed: none, randk, topk"),
        ({"compressor": "rand-k"}, "compressor='rand-k' is unknown; allowed: none, randk, topk"),
        ({"aggregator": "Mean"}, "aggregator='Mean' is unknown; allowed: mean, median, trimmed"),
    ],
)
def test_exact_loss_refuses_what_it_does_not_cover(change, match):
    """A config with another aggregator, compressor, keep or spectrum is refused naming it."""
    row = {**asdict(quadratic.QuadConfig(dim=10)), **change}
    with pytest.raises(TheoryError, match=match):
        th.exact_loss(row)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: th.stationary_loss(1.0, lr=0.0), r"lr=0.0 must be a finite number > 0"),
        (lambda: th.stationary_loss(1.0, lr=float("nan")), "lr=nan must be a finite number"),
        (lambda: th.stationary_loss([1.0, -1.0], lr=0.1), "> 0; got -1.0"),
        (lambda: th.stationary_loss("a", lr=0.1), "curvatures must be finite numbers"),
        (lambda: th.stationary_loss([], lr=0.1), "curvatures must be finite numbers"),
        (lambda: th.stationary_loss(1j, lr=0.1), "curvatures must be finite numbers"),
        (lambda: th.stationary_loss([[1.0]], lr=0.1), "curvatures must be finite numbers"),
        (lambda: th.exact_loss({**asdict(quadratic.QuadConfig()), "lr": "a"}), "lr='a' is not"),
        (lambda: th.stationary_loss(1.0, lr=0.1, H=0), "H=0 must be a whole number from 1"),
        (lambda: th.stationary_loss(1.0, lr=0.1, H=2.5), "H=2.5 must be a whole number"),
        (lambda: th.stationary_loss(1.0, lr=0.1, M=True), "M=True must be a whole number"),
        (lambda: th.stationary_loss(1.0, lr=0.1, omega=-1), "omega=-1 must be a finite number"),
        (lambda: th.stationary_loss(1.0, lr=0.1, outer_momentum=1.0), r"in \[0, 1\)"),
        (lambda: th.stationary_loss(1.0, lr=0.1, masks="x"), "masks='x' is unknown"),
        (lambda: th.stationary_loss(1.0, lr=0.1, nesterov="yes"), "must be True or False"),
        (lambda: th.stationary_loss(1.0, lr=0.1, noise=-1), "noise=-1 must be"),
        (lambda: th.mode_covariance([1.0, 2.0], lr=0.1), "takes one curvature"),
        (lambda: th.mode_covariance(1.0, lr=2.5), r"unstable \(rho\(A\) >= 1\)"),
        (lambda: th.mode_covariance(1.0, lr=0.5, M=1, omega=9.0), "not mean-square stable"),
        (lambda: th.loss_curve(1.0, 0, lr=0.1), "rounds=0 must be a whole number"),
        (lambda: th.exact_loss([1, 2]), "expected a mapping"),
        (lambda: th.exact_loss({"dim": 3}), "missing setting"),
        (lambda: th.stable_step(0.0, 1.0, 4), "s=0.0 must be a finite number > 0"),
        (lambda: th.curvatures("linear", 0, 1.0, 1.0), "dim=0 must be a whole number"),
        (lambda: th.curvatures("linear", 3, 1.0, 0.5), "condition=0.5 must be"),
    ],
)
def test_bad_settings_are_one_line_errors(call, match):
    """Each bad setting of the theory functions is a one-line TheoryError naming the value."""
    with pytest.raises(TheoryError, match=match) as info:
        call()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "call",
    [
        lambda: th.stationary_loss(1.0, lr=1e308),
        lambda: th.stationary_loss(1.0, lr=1e200, noise=1e200),
        lambda: float(th.stationary_variance(1.0, lr=1e308)[0]),
        lambda: float(th.second_moment_radius(1.0, lr=1e308)[0]),
        lambda: float(th.variance_gain(1.0, lr=1e308)[0]),
        lambda: float(th.loss_curve(1.0, 3, lr=1e308)[-1]),
        lambda: th.local_sgd_variance(1e308, 1.0, 1.0, 0.0, 1),
        lambda: th.compressed_sync_variance(1e308, 1.0, 1.0, 0.0, 1),
    ],
)
def test_a_step_beyond_double_precision_is_unstable_not_an_overflow(call):
    """lr=1e308 raised a raw OverflowError (lr**2 in Python floats; hostile review): a step
    that large is unstable, and the functions say so with inf, as their docstrings promise."""
    assert call() == math.inf


def test_mode_covariance_of_a_step_beyond_double_precision_is_refused():
    """mode_covariance documents a TheoryError for an unstable mode, not an OverflowError."""
    with pytest.raises(TheoryError, match="unstable"):
        th.mode_covariance(1.0, lr=1e308)


@pytest.mark.parametrize("s, lr", [(5e-324, 1e-300), (1.0, 1e-300), (1e-20, 1e-3)])
def test_a_step_too_small_to_resolve_is_refused_not_called_unstable(s, lr):
    """A stable mode whose step lr*s is below double precision's resolution next to 1 was
    returned as inf (unstable); its variance is finite but cannot be computed: refused."""
    with pytest.raises(TheoryError, match="too small to resolve in double precision"):
        th.stationary_loss(s, lr=lr)


def test_a_small_resolvable_step_keeps_its_finite_loss():
    """Just above the resolution the loss is about lr * noise**2 / 4 (one mode, s = 1)."""
    assert th.stationary_loss(1.0, lr=1e-10) == pytest.approx(2.5e-11, rel=1e-6)


def test_theory_local_sgd_recovers_the_step_and_the_workers():
    """theory_local_sgd fitted to exact losses recovers the step 0.05, the 16 workers and L0 0."""
    fitted = fr.fit(fr.load_grid(_exact_grid()), "theory_local_sgd")
    c = fitted.constants
    assert c["u"] == pytest.approx(0.05, rel=1e-4)
    assert c["n"] == pytest.approx(16, rel=1e-4)
    assert abs(c["L0"]) < 1e-6


def test_theory_floor_names_the_stability_limit():
    """theory_floor fitted to exact losses puts omega_max at the stability limit."""
    M, lr, H = 16, 0.05, 16
    df = _exact_grid(M=M, lr=lr, H_levels=(H,), keeps=(1.0, 0.5, 0.25, 0.125, 0.0625, 0.05))
    fitted = fr.fit(fr.load_grid(df), "theory_floor")
    r = 1 - (1 - lr) ** H
    assert fitted.constants["omega_max"] == pytest.approx(M * (2 - r) / r, rel=1e-4)


def test_theory_workers_recovers_r():
    """theory_workers fitted over several M and outer steps recovers r = 1 - 0.95**4."""
    frames = [_exact_grid(M=M, eta=eta, H_levels=(4,)) for M in (4, 16, 64) for eta in (0.5, 1.0)]
    df = pd.concat(frames, ignore_index=True)
    fitted = fr.fit(fr.load_grid(df), "theory_workers")
    assert fitted.constants["r"] == pytest.approx(1 - 0.95**4, rel=1e-4)


def test_theory_workers_on_one_M_and_one_outer_step_is_flagged_as_composition_on_one_H_is():
    """A hostile review said theory_workers fitted with exit 0 where M and outer_lr never vary.
    It is treated as any form reading a constant variable (composition at one H): fit names
    both variables in its diagnostics, and compare sets every split aside as degenerate."""
    g = fr.load_grid(_exact_grid(M=16, eta=1.0, H_levels=(4,)))
    reasons = fr.fit(g, "theory_workers").reasons
    assert "all training cells have M=16: its effect cannot be identified" in reasons
    assert "all training cells have outer_lr=1: its effect cannot be identified" in reasons
    one_h = fr.load_grid(_exact_grid(H_levels=(4,)))
    h_reasons = fr.fit(one_h, "composition").reasons
    assert "all training cells have H=4: b is not identifiable" in h_reasons
    for grid, form in ((g, "theory_workers"), (one_h, "composition")):
        s = fr.compare(grid, forms=[form, "omega_only"], splits=5, train_frac=0.8).summary
        row = s.set_index("form").loc[form]
        assert (row["splits_used"], row["degenerate_splits"]) == (0, 5)


def test_theory_forms_are_built_in_but_not_defaults():
    """The three theory forms are built in, cite the theory module, and are not default forms."""
    from fitrules.model.forms import BUILTIN_FORMS, DEFAULT_FORMS

    for name in ("theory_floor", "theory_local_sgd", "theory_workers"):
        assert name in BUILTIN_FORMS and name not in DEFAULT_FORMS
        assert "fitrules.sim.theory" in BUILTIN_FORMS[name].description


@pytest.mark.parametrize("momentum", [0.0, 0.5])
def test_the_variance_gain_divides_the_uncompressed_variance(momentum):
    """Stationary variance = (variance without the state-dependent term) / (1 - gain)."""
    kw = dict(lr=0.2, H=4, M=4, outer_momentum=momentum)
    v = th.stationary_variance(0.5, omega=3.0, **kw)[0]
    g = th.variance_gain(0.5, omega=3.0, **kw)[0]
    # without the multiplicative term the variance is (1 + omega) times the uncompressed one
    v0 = th.stationary_variance(0.5, omega=0.0, **kw)[0] * 4.0
    assert v == pytest.approx(v0 / (1 - g), rel=1e-9)
    assert th.variance_gain(1.0, lr=0.1, M=4, omega=0.0)[0] == 0.0
    limit = th.stable_step(1.0, 15.0, 16)
    assert th.variance_gain(1.0, lr=limit * 0.999, M=16, omega=15.0)[0] < 1
    assert th.variance_gain(1.0, lr=limit * 1.001, M=16, omega=15.0)[0] > 1


def test_a_mode_on_the_stability_boundary_does_not_settle():
    """Issue 43 (the API fuzzer's 10,000-case run): a mode whose second-moment map has an
    eigenvalue of 1 that rounding put just inside was solved on a singular matrix
    (LinAlgError); its variance does not settle, so the loss is inf, as beyond the boundary."""
    from fitrules.sim.theory import stationary_loss

    assert stationary_loss([1.0, 0.5], lr=3.0, outer_momentum=0.5, nesterov=False) == np.inf
    assert np.isfinite(stationary_loss([1.0, 0.5], lr=0.3, outer_momentum=0.5, nesterov=False))
    # a tiny step is near the boundary too but stable: its variance stays linear in lr
    from fitrules.sim.theory import stationary_variance

    kw = dict(outer_momentum=0.9, nesterov=True)
    small, smaller = (stationary_variance(1.0, lr=lr, **kw)[0] for lr in (1e-9, 1e-12))
    assert np.isclose(smaller / small, 1e-3, rtol=1e-3)
