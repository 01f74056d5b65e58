"""No write from Python replaces a file a result was made from, directly or through a
link."""

from __future__ import annotations

import os

import pytest

import fitrules as fr
from fitrules.base.errors import ReportError


KINDS = ("compare", "fit", "search")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """x.csv (the composition grid) in a folder of its own and the compare, fit and search
    results made from it there, once for the module: no test here changes a result, and each
    checks that the table is unchanged (made again for each test, the three took 30 s of the
    suite)."""
    from conftest import composition_grid

    folder = tmp_path_factory.mktemp("table")
    path = folder / "x.csv"
    composition_grid().to_csv(path, index=False)
    home = os.getcwd()
    os.chdir(folder)
    try:
        g = fr.load_grid(str(path))
        results = {
            "compare": fr.compare(g, forms=["composition"], splits=5),
            "fit": fr.fit(g, "composition"),
            # linear and log factors only: no test here reads the candidates
            "search": fr.search(
                g, terms=1, max_constants=3, factors="linear,log", splits=3, inner_splits=2,
                references=[],
            ),
        }
    finally:
        os.chdir(home)
    return path, results


@pytest.fixture
def table(made, tmp_path, monkeypatch):
    """The module's table, the test run in a working directory of its own."""
    monkeypatch.chdir(tmp_path)
    return made[0]


@pytest.fixture
def results(made):
    return made[1]


@pytest.mark.parametrize("kind", KINDS)
def test_to_json_refuses_the_table_it_came_from(table, results, kind):
    """to_json onto the table a result was made from is refused, and the table is unchanged.

    Audit case: to_json("x.csv") returned normally and x.csv became JSON."""
    before = table.read_bytes()
    with pytest.raises(ReportError, match=r"path .*x\.csv.*is an input of this result"):
        results[kind].to_json(str(table))
    assert table.read_bytes() == before


@pytest.mark.parametrize("kind", KINDS)
def test_to_json_refuses_a_link_to_the_table(table, results, kind, tmp_path):
    """to_json onto a link to the input table is refused; the table and link stay."""
    link = tmp_path / "out.json"
    link.symlink_to(table)
    before = table.read_bytes()
    with pytest.raises(ReportError, match="out.json"):
        results[kind].to_json(str(link))
    assert table.read_bytes() == before and link.is_symlink()


@pytest.mark.parametrize("kind", KINDS)
def test_to_json_never_writes_through_a_link(table, results, kind, tmp_path):
    """to_json onto a symbolic link to another file is refused; that file is unchanged."""
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("keep me\n")
    link = tmp_path / "link.json"
    link.symlink_to(outside)
    with pytest.raises(ReportError, match="is a symbolic link"):
        results[kind].to_json(str(link))
    assert outside.read_text() == "keep me\n" and link.is_symlink()


@pytest.mark.parametrize("kind", KINDS)
def test_to_json_refuses_forms_toml(table, results, kind, tmp_path):
    """to_json onto forms.toml is refused and the forms file is unchanged."""
    forms = tmp_path / "forms.toml"
    forms.write_text('mine = "L0 + a*omega"\n')
    with pytest.raises(ReportError, match="forms.toml"):
        results[kind].to_json(str(forms))
    assert forms.read_text() == 'mine = "L0 + a*omega"\n'


@pytest.mark.parametrize("kind", KINDS)
def test_report_refuses_a_folder_holding_the_table(table, results, kind):
    """report into the folder holding the input table is refused, even with force."""
    before = table.read_bytes()
    with pytest.raises(ReportError, match="a file this result was made from"):
        results[kind].report(str(table.parent), force=True)
    assert table.read_bytes() == before


def test_ci_to_json_refuses_its_table(tmp_path, monkeypatch):
    """fr.ci's result refuses to_json onto the table it was made from."""
    monkeypatch.chdir(tmp_path)
    import pandas as pd

    rows = pd.DataFrame({"algo": ["a"] * 4 + ["b"] * 4, "seed": list(range(4)) * 2,
                         "loss": [2.0, 2.1, 2.05, 2.02, 2.2, 2.3, 2.25, 2.21]})  # fmt: skip
    path = tmp_path / "p.csv"
    rows.to_csv(path, index=False)
    p = fr.ci(str(path), baseline="algo=a", treatment="algo=b", resamples=1000)
    with pytest.raises(ReportError, match="is an input of this result"):
        p.to_json(str(path))


def test_to_json_still_writes_a_new_file(table, results, tmp_path):
    """to_json writes a new file that is none of the inputs."""
    out = tmp_path / "out.json"
    results["fit"].to_json(str(out))
    assert out.read_text().startswith("{")
