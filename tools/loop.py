"""The whole loop, run and written down: design -> predict -> simulate -> score.

    python -m tools.loop reports/design-loop/additive composition,additive 24

Runs ``fitrules design`` with a report directory, then every command it prints, in order
(the predictions go to the ledger before any run is made), and writes ``loop.md``: each
command with what it printed, the ledger's last timestamp against the runs' manifest date,
and the verdict of the paired test on the new runs.
"""

from __future__ import annotations

import contextlib
import io
import json
import shlex
import sys
from pathlib import Path

from fitrules.cli import main


def _run(args: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(args)
    return code, out.getvalue()


def run_loop(target: Path, forms: str, budget: int, extra: list[str] | None = None) -> int:
    """Design a batch for ``forms`` on the default grid, then run the loop in ``target``."""
    target = Path(target)
    ledger, runs = target / "ledger.jsonl", target / "runs.csv"
    design_cmd = [
        "design",
        "--forms",
        forms,
        "--budget",
        str(budget),
        *(extra or []),
        "--report",
        str(target),
        "--ledger",
        str(ledger),
        "--runs-out",
        str(runs),
        "--force",
    ]
    steps = [("fitrules " + shlex.join(design_cmd), *_run(design_cmd))]
    if steps[0][1]:
        return steps[0][1]
    for line in (target / "commands.sh").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        args = shlex.split(line)[1:]
        if args[0] == "score":
            args += ["--json", str(target / "score.json")]
        code, out = _run(args)
        steps.append((shlex.join(["fitrules", *args]), code, out))
        if code:
            return code
    records = [json.loads(x) for x in ledger.read_text().splitlines() if x.strip()]
    manifest = json.loads((runs.with_name(runs.stem + ".manifest.json")).read_text())
    score = json.loads((target / "score.json").read_text())
    lines = [
        f"# The loop for {forms}: design, predict, simulate, score",
        "",
        "Made by `python -m tools.rebuild` (tools/loop.py): the design "
        "below chose the cells; each form's prediction for each cell went to `ledger.jsonl` "
        "before any run; the harness then ran the cells (`runs.toml`, fresh seeds) into "
        "`runs.csv`; `fitrules score` scored the ledger and tested the forms on the new runs.",
        "",
        f"- ledger: {len(records)} records, the last written at {records[-1]['time']}",
        f"- runs: {manifest['runs']} runs, finished at {manifest['date']}",
        "",
        "## Verdict on the new runs",
        "",
    ]
    for p in score["pairs"]:
        lo, hi = p["ci"]
        verdict = (
            "the new runs do not separate them"
            if p["p_holm"] is None or p["p_holm"] >= 0.05
            else f"{p['a'] if p['mean_sq_diff'] < 0 else p['b']} predicted the new runs better"
        )
        lines.append(
            f"- **{p['a']} vs {p['b']}**: {verdict}. Over {p['cells']} new cells and "
            f"{p['runs']} runs the mean squared-error difference (first minus second) is "
            f"{p['mean_sq_diff']:+.3g} (95% interval {lo:+.3g} to {hi:+.3g}), p = "
            f"{p['p']:.2g}, Holm {p['p_holm']:.2g}; {p['a']} was closer at "
            f"{p['a_closer_cells']} of {p['cells']} cells."
        )
    lines += ["", "## How often the recorded intervals covered the new means", ""]
    for c in score.get("coverage", []):
        if c["form"] != "all":
            continue
        per_form = "; ".join(
            f"{x['form']} {x['covered']} of {x['scored']}"
            for x in score["coverage"]
            if x["interval_kind"] == c["interval_kind"] and x["form"] != "all"
        )
        level = {round(100 * r.get("level", 0.95)) for r in records}
        lines.append(
            f"- {'/'.join(f'{v}%' for v in sorted(level))} intervals ({c['interval_kind']}): "
            f"**{c['covered']} of {c['scored']}** new-cell means covered ({per_form})."
        )
    by_id = {r["id"]: r for r in records}
    old = [
        (by_id[s["id"]].get("intervals") or {}).get("constants_only")
        for s in score["scores"]
        if s["status"] == "scored"
    ]
    observed = [s["observed"] for s in score["scores"] if s["status"] == "scored"]
    given = [iv for iv in old if iv is not None]
    if old and len(given) == len(old):
        hit = sum(lo <= y <= hi for (lo, hi), y in zip(given, observed, strict=True))
        lines.append(
            f"- for contrast, the constants-only bootstrap intervals each record also keeps "
            f"(`intervals.constants_only` in `ledger.jsonl`; they treat the form as exactly "
            f"true) covered {hit} of {len(old)}."
        )
    lines += ["", "![the design](design.png)", "", "## Transcript", ""]
    for cmd, code, out in steps:
        lines += [f"`{cmd}` (exit {code})", "", "```", out.rstrip(), "```", ""]
    (target / "loop.md").write_text("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(run_loop(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])))
