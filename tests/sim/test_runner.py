"""The harness's runner (fitrules.sim.runner): grids regenerated, resumed, failing runs named,
outputs of another spec refused."""

import json

import numpy as np
import pandas as pd
import pytest

from conftest import DATA
from fitrules.base.errors import SimError
from fitrules.sim.runner import simulate
from fitrules.sim.spec import load_spec, parse_spec


def test_smoke_grid_regenerates_to_the_committed_numbers(tmp_path):
    """simulate remakes the smoke grid's committed losses and writes its manifest."""
    spec = load_spec(DATA / "specs" / "smoke.toml")
    out = tmp_path / "smoke.csv"
    table = simulate(spec, out, jobs=1, show_progress=False)
    committed = pd.read_csv(DATA / "smoke.csv")
    assert len(table) == len(committed) == len(spec.runs)
    np.testing.assert_allclose(pd.read_csv(out)["loss"], committed["loss"], rtol=1e-4)
    manifest = json.loads((tmp_path / "smoke.manifest.json").read_text())
    assert manifest["spec_sha256"] == spec.sha256 and len(manifest["wall_s_per_run"]) == 12


def test_interrupted_grid_resumes(tmp_path):
    """A smoke table of 5 runs resumes: the 7 missing runs are added, with the committed losses."""
    spec = load_spec(DATA / "specs" / "smoke.toml")
    committed = pd.read_csv(DATA / "smoke.csv")
    out = tmp_path / "smoke.csv"
    committed.iloc[:5].to_csv(out, index=False)
    simulate(spec, out, jobs=1, show_progress=False)
    manifest = json.loads((tmp_path / "smoke.manifest.json").read_text())
    assert manifest["runs_this_invocation"] == 7
    np.testing.assert_allclose(pd.read_csv(out)["loss"], committed["loss"], rtol=1e-4)


def test_a_failing_run_is_named_and_the_others_kept(tmp_path, monkeypatch):
    """A failing run is named, the other 11 kept without a manifest; a rerun completes the grid."""
    from fitrules.sim import runner

    spec = load_spec(DATA / "specs" / "smoke.toml")
    victim = next(r for r in spec.runs if (r.H, r.keep, r.seed) == (4, 0.25, 1))
    real_run = runner.run
    monkeypatch.setattr(
        runner, "run", lambda cfg, corpus: 1 / 0 if cfg == victim else real_run(cfg, corpus)
    )
    out = tmp_path / "smoke.csv"
    with pytest.raises(SimError, match=r"1 run\(s\) failed: H=4,keep=0.25,seed=1: ZeroDivision"):
        simulate(spec, out, show_progress=False)
    assert len(pd.read_csv(out)) == 11 and not (tmp_path / "smoke.manifest.json").exists()
    monkeypatch.undo()
    simulate(spec, out, show_progress=False)
    committed = pd.read_csv(DATA / "smoke.csv")
    np.testing.assert_allclose(pd.read_csv(out)["loss"], committed["loss"], rtol=1e-4)


def test_output_of_another_spec_is_refused(tmp_path):
    """simulate refuses an output table made from a different spec and leaves it unchanged."""
    out = tmp_path / "g.csv"
    pd.read_csv(DATA / "smoke.csv").to_csv(out, index=False)
    before = out.read_bytes()
    other = parse_spec('name = "other"\nseeds = [0]\n[fixed]\nsteps = 4\nwidth = 8\n')
    with pytest.raises(SimError, match="different spec"):
        simulate(other, out, show_progress=False)
    assert out.read_bytes() == before
