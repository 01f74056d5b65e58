"""The built-in forms (``fitrules forms list``) and the ones ``compare`` fits by default."""

from __future__ import annotations

from fitrules.model.form_class import Form

BUILTIN_FORMS: dict[str, Form] = {
    f.name: f
    for f in [
        Form(
            "composition",
            "L0 + a*omega*(H/16)**b",
            ("H", "omega"),
            description="Compression noise scales linearly in omega and by a power of H: "
            "the three-constant composition rule.",
            source="built-in",
        ),
        Form(
            "additive",
            "L0 + a*omega**c + b*(H/16)**d",
            ("H", "omega"),
            description="Separate power laws in omega and H, added: five constants.",
            source="built-in",
        ),
        Form(
            "free_omega",
            "L0 + a*omega**c*(H/16)**b",
            ("H", "omega"),
            description="The composition rule with a free exponent on omega.",
            source="built-in",
        ),
        Form(
            "composition_per_h",
            "L0[H] + a*omega*(H/16)**b",
            ("H", "omega"),
            description="The composition rule with one intercept per level of H (L0[H]): "
            "the loss at omega = 0 may move with H.",
            source="built-in",
        ),
        Form(
            "omega_only",
            "L0 + a*omega",
            ("omega",),
            description="Linear in omega, no dependence on H: the null model for H.",
            source="built-in",
        ),
        Form(
            "log_additive",
            "L0 + a*omega + b*log(H/16)",
            ("H", "omega"),
            description="Linear in omega plus a log-linear H effect; every constant linear.",
            source="built-in",
        ),
        # Theory forms (fitrules.sim.theory): exact for local SGD with unbiased rand-k compressed
        # displacements on a noisy quadratic of one curvature s, M workers averaged, outer
        # step without momentum; the excess loss is the constant part's complement (L0).
        Form(
            "theory_floor",
            "L0 + c*(1 + omega)/(1 - omega/omega_max)",
            ("omega",),
            bounds={"omega_max": (1e-3, 1e9)},
            start={"omega_max": (1.0, 1e6)},
            description="The compressed-sync floor: the excess loss grows as (1 + omega), "
            "amplified near the stability limit omega_max = M*(2 - eta*r)/(eta*r) "
            "(r = 1 - (1 - lr*s)**H), where the outer step stops being mean-square stable. "
            "Exact on the noisy quadratic of one curvature at fixed H, M, lr and outer step "
            "eta, no momentum (fitrules.sim.theory.local_sgd_variance).",
            source="built-in",
        ),
        Form(
            "theory_local_sgd",
            "L0 + c*(1 + omega)*(1 + (1 - u)**H)/(2 - (1 - (1 - u)**H)*(1 + omega/n))",
            ("H", "omega"),
            bounds={"u": (1e-4, 1.0), "n": (1.0, 1e5)},
            start={"u": (1e-3, 1.0), "n": (1.0, 1e4)},
            description="The stationary loss of local SGD with compressed displacements in H "
            "and omega: u = lr*s (one curvature), n workers, outer step 1, no momentum; the "
            "(1 + omega) floor, the (1 + (1-u)**H) factor of H inner steps and the stability "
            "limit (1 - (1-u)**H)*(1 + omega/n) < 2 (fitrules.sim.theory.local_sgd_variance).",
            source="built-in",
        ),
        Form(
            "theory_workers",
            "L0 + c*outer_lr*(1 + omega)/(M*(2 - r*outer_lr*(1 + omega/M)))",
            ("M", "omega", "outer_lr"),
            bounds={"r": (1e-4, 2.0)},
            start={"r": (1e-3, 2.0)},
            description="The floor's dependence on the number of workers M and the outer "
            "step: excess loss eta*(1 + omega)/(M*(2 - r*eta*(1 + omega/M))) with "
            "r = 1 - (1 - lr*s)**H, no momentum; more workers restore the step, never the "
            "(1 + omega) factor (fitrules.sim.theory.local_sgd_variance).",
            source="built-in",
        ),
    ]
}
DEFAULT_FORMS = (
    "composition",
    "additive",
    "free_omega",
    "omega_only",
    "log_additive",
    "composition_per_h",
)
