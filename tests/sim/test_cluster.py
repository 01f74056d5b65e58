"""fitrules simulate --scheduler: the smoke grid on Dask clusters, with faults. Tests that start
a cluster skip when the distributed extra is missing."""

import json
import os
import signal
import time

import numpy as np
import pandas as pd
import pytest

from conftest import DATA
from fitrules.base.errors import SimError
from fitrules.cli import main
from fitrules.sim import cluster, runner
from fitrules.sim.runner import KEY_FIELDS, run_key, simulate
from fitrules.sim.spec import load_spec

SPEC = load_spec(DATA / "specs" / "smoke.toml")

# One run of the smoke grid, named as the failure message names it.
VICTIM = next(r for r in SPEC.runs if (r.H, r.keep, r.seed) == (4, 0.25, 1))


def assert_is_the_smoke_grid(out):
    """``out`` holds every run of the smoke grid once, with the committed losses."""
    table = pd.read_csv(out)
    committed = pd.read_csv(DATA / "smoke.csv")
    assert len(table) == len(SPEC.runs)
    assert table[KEY_FIELDS].equals(committed[KEY_FIELDS])
    np.testing.assert_allclose(table["loss"], committed["loss"], rtol=1e-4)


def keys_in(out):
    return [runner._row_key(row) for row in pd.read_csv(out).to_dict("records")]


@pytest.mark.parametrize(
    "scheduler, jobs, match",
    [
        ("local:0", 1, "local:N needs a whole number of processes N >= 1"),
        ("local:two", 1, "local:N needs a whole number"),
        ("", 1, "expected a scheduler address such as tcp://host:8786"),
        ("local:2", 2, "jobs 2 with scheduler local:2: give one of them"),
        # hostile review: no upper bound, a fullwidth digit, a raw ValueError from Dask
        ("local:257", 1, r"local:N .* N from 1 to 256 \(as jobs\)"),
        ("local:10000000", 1, r"local:N .* N from 1 to 256"),
        ("local:\uff12", 1, "local:N needs a whole number"),
        ("bogus://x", 1, r"'bogus://x': expected local:N .* or a scheduler address such as "
         r"tcp://host:8786 \(schemes: tcp, tls, ws, wss, inproc, ucx\)"),
        ("tcp://host:port", 1, r"'tcp://host:port': expected local:N"),
        ("tcp://:8786", 1, r"'tcp://:8786': expected local:N"),
    ],
)  # fmt: skip
def test_bad_scheduler_requests(tmp_path, scheduler, jobs, match):
    """Refused at once, before a cluster starts or anything is written."""
    with pytest.raises(SimError, match=match):
        simulate(SPEC, tmp_path / "s.csv", jobs=jobs, scheduler=scheduler, show_progress=False)
    assert not (tmp_path / "s.csv").exists()


@pytest.mark.parametrize("scheduler", ["local:257", "local:\uff12", "bogus://x", "tcp://h:x"])
def test_the_form_of_a_scheduler_is_checked_without_dask(scheduler):
    """local:N is capped at the limit of --jobs, and an address must be one Dask can dial: the
    review found local:N unbounded and 'bogus://x' a raw ValueError from the cluster library."""
    with pytest.raises(SimError, match="^scheduler "):
        cluster.parse_scheduler(scheduler)


def test_an_unreachable_scheduler_is_refused_within_seconds(tmp_path, distributed):
    """Nothing listens on port 1: refused after a quick probe, not after Dask's 30 s timeout
    (hostile review)."""
    t0 = time.perf_counter()
    with pytest.raises(SimError, match=r"^scheduler tcp://127\.0\.0\.1:1: cannot connect"):
        simulate(SPEC, tmp_path / "s.csv", scheduler="tcp://127.0.0.1:1", show_progress=False)
    assert time.perf_counter() - t0 < cluster.PROBE_TIMEOUT + 3
    assert not list(tmp_path.iterdir())


def test_an_address_with_no_port_reaches_dask_with_its_port(tmp_path, distributed, monkeypatch):
    """'--scheduler 2.0' (the fuzzer: a host the probe reached) was a raw ValueError from Dask,
    which dials no host without a port: it is now dialled as tcp://2.0:8786 and refused in one
    line when nothing there is a scheduler."""
    dialled = []

    def client(address, timeout):
        dialled.append(address)
        raise OSError(f"Timed out trying to connect to {address}")

    monkeypatch.setattr(cluster, "_probe", lambda scheduler, address: None)
    monkeypatch.setattr(distributed, "Client", client)
    with pytest.raises(SimError, match=r"^scheduler 2\.0: cannot connect: Timed out") as info:
        simulate(SPEC, tmp_path / "s.csv", scheduler="2.0", show_progress=False)
    assert "\n" not in str(info.value)
    assert dialled == ["tcp://2.0:8786"]
    assert cluster._dial_address("[::1]") == "tcp://[::1]:8786"
    assert cluster._dial_address("tls://h:9") == "tls://h:9"


def test_mismatched_workers_are_named():
    """match_workers names, in one line, each worker with another fitrules or none at all."""
    ours = ("0.1.0", "a" * 64)
    found = {
        "tcp://10.0.0.2:4000": ours,
        "tcp://10.0.0.3:4000": ("0.2.0", "a" * 64),
        "tcp://10.0.0.4:4000": ModuleNotFoundError("No module named 'fitrules'"),
    }
    with pytest.raises(SimError) as info:
        cluster.match_workers(found, ours)
    message = str(info.value)
    assert "tcp://10.0.0.3:4000 has fitrules 0.2.0" in message
    assert "tcp://10.0.0.4:4000 cannot load fitrules" in message
    assert "10.0.0.2" not in message and "\n" not in message
    assert cluster.match_workers({"b": ours, "a": ours}, ours) == ["a", "b"]


def test_local_cluster_gives_the_local_pool_numbers(tmp_path, distributed, capsys):
    """simulate --scheduler local:2 writes the committed smoke grid, its manifest the 2 workers."""
    out = tmp_path / "smoke.csv"
    spec = str(DATA / "specs" / "smoke.toml")
    assert main(["simulate", spec, "--out", str(out), "--scheduler", "local:2"]) == 0
    assert "12 runs of 'smoke'" in capsys.readouterr().out
    assert_is_the_smoke_grid(out)
    manifest = json.loads((tmp_path / "smoke.manifest.json").read_text())
    assert manifest["scheduler"] == "local:2" and "jobs" not in manifest
    assert manifest["command"].endswith("--scheduler local:2")
    assert len(manifest["workers"]) == 2 and sum(manifest["workers"].values()) == 12


def test_a_run_that_keeps_failing_is_named_and_the_rest_kept(tmp_path, distributed, monkeypatch):
    """A run failing every retry is named, the other 11 are kept, and a rerun completes the grid."""
    attempts = []

    def run_or_fail(cfg, corpus):
        if cfg == VICTIM:
            attempts.append(cfg)
            raise ValueError("boom")
        return runner.run(cfg, corpus)

    out = tmp_path / "smoke.csv"
    # Threads in this process, so that the patched function is the one the workers call.
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as lc:
        with monkeypatch.context() as patch:
            patch.setattr(cluster, "run", run_or_fail)
            with pytest.raises(SimError, match=r"1 run\(s\) failed: H=4,keep=0.25,seed=1: "):
                simulate(SPEC, out, scheduler=lc.scheduler_address, show_progress=False)
        assert len(attempts) == 1 + cluster.RETRIES
        assert len(keys_in(out)) == 11 and run_key(VICTIM) not in keys_in(out)
        assert not (tmp_path / "smoke.manifest.json").exists()

        simulate(SPEC, out, scheduler=lc.scheduler_address, show_progress=False)
    assert_is_the_smoke_grid(out)
    assert json.loads((tmp_path / "smoke.manifest.json").read_text())["runs_this_invocation"] == 1


@pytest.mark.timing
@pytest.mark.slow  # several seconds of CPU: CI's slow step runs it
def test_a_worker_killed_mid_grid_loses_nothing(tmp_path, distributed):
    """A worker killed mid-grid loses no run and duplicates none: the table is the smoke grid."""
    out = tmp_path / "smoke.csv"
    with cluster.local_cluster(2) as lc, distributed.Client(lc) as client:
        pids = client.run(os.getpid)
        killed = []

        def kill_a_busy_worker_once(row):
            if killed:
                return
            busy = {address: keys for address, keys in client.processing().items() if keys}
            address = sorted(busy)[0]
            os.kill(pids[address], signal.SIGKILL)
            killed.append((address, len(busy[address])))

        simulate(
            SPEC,
            out,
            scheduler=lc.scheduler_address,
            show_progress=False,
            on_run=kill_a_busy_worker_once,
        )
        (address, in_flight), *_ = killed
        assert in_flight >= 1 and pids[address] not in client.run(os.getpid).values()
    keys = keys_in(out)
    assert len(keys) == len(set(keys)) == 12
    assert set(keys) == {run_key(cfg) for cfg in SPEC.runs}
    assert_is_the_smoke_grid(out)


@pytest.mark.timing
@pytest.mark.slow  # several seconds of CPU: CI's slow step runs it
def test_an_interrupted_cluster_grid_resumes_to_the_same_table(tmp_path, distributed):
    """A cluster grid interrupted after 4 runs resumes with the other 8 to the committed table."""
    out = tmp_path / "smoke.csv"

    def stop_after_four(row):
        if len(pd.read_csv(out)) == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        simulate(SPEC, out, scheduler="local:2", show_progress=False, on_run=stop_after_four)
    assert len(keys_in(out)) == 4
    assert not (tmp_path / "smoke.manifest.json").exists()

    simulate(SPEC, out, scheduler="local:2", show_progress=False)
    assert_is_the_smoke_grid(out)
    assert json.loads((tmp_path / "smoke.manifest.json").read_text())["runs_this_invocation"] == 8
