"""benchmarks/bench_peers.py end to end on a tiny data set (the real run is >= 2 GB per copy): every tool (pydaf on
H5df, FilesDaf and ZarrDaf; anndata in memory and backed; zarr-python + dask; pydaf on dask) runs the five steps in
its own process, each step's result equals the scipy reference computed from the .h5ad, and the data set is removed
unless kept. Speed and memory are the script's own report, not this test's."""

from __future__ import annotations

import os

import numpy as np
import pytest

from .benchmark_scripts import load_benchmark

for _module in ("anndata", "zarr", "dask", "distributed"):
    pytest.importorskip(_module, reason=f"bench_peers compares pydaf with {_module}: it is not installed")


def test_benchmark_script_end_to_end(tmp_path, capsys):
    bench = load_benchmark("bench_peers")
    data = str(tmp_path / "peers")
    options = ["--data", data, "--scale", "0.002", "--genes", "2000", "--repeats", "1"]
    assert bench.main([*options, "--keep"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("data: 400 cells x 2,000 genes")
    assert lines[1].startswith("built: generate ")
    header = lines.index(next(line for line in lines if line.startswith("tool ")))
    assert lines[header].split() == ["tool", "step", "best", "s", "median", "s", "vs", "pydaf", "RSS", "MB", "anon",
                                     "MB"]
    skipped = {line.split()[0] for line in lines[header + 1:] if line.split()[1:2] == ["-"]}
    ran = [tool for tool in bench.TOOLS if tool not in skipped]
    assert not skipped
    rows = [line.split() for line in lines[header + 1:header + 1 + len(ran) * len(bench.STEPS)]]
    assert [row[:2] for row in rows] == [[tool, step] for tool in ran for step in bench.STEPS]
    assert all(float(row[2]) >= 0 and row[4].endswith("x") and float(row[5]) > 0 and float(row[6]) > 0 for row in rows)
    for step in ("totals", "means", "select", "write"):
        line = next(line for line in lines if line.startswith(f"equal {step}: "))
        assert line == f"equal {step}: " + ", ".join(f"{tool} yes" for tool in ran)
    assert any(line.startswith("pydaf local fastest or within 1.2x of the fastest peer: open ") for line in lines)
    assert bench.is_built(data, 400, 2000)
    # Kept: the next run reuses it (no "built:" line), and then removes it.
    assert bench.main([*options, "--tools", "pydaf-files,anndata-mem"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert not lines[1].startswith("built:")
    assert "equal totals: pydaf-files yes, anndata-mem yes" in lines
    assert sorted(os.listdir(data)) == []


def test_comparison_catches_a_difference():
    bench = load_benchmark("bench_peers")
    import scipy.sparse as sp

    selected = sp.csr_matrix(np.array([[0, 1.0], [2.0, 0]], dtype=np.float32))
    expected = bench.fingerprints([3.0, 1.0], np.ones((bench.TYPES, 2)), selected)
    assert bench.compare(expected, expected) == {"totals": True, "means": True, "select": True}
    changed = selected.copy()
    changed[0, 1] = 3.0
    means = np.ones((bench.TYPES, 2))
    means[4, 1] = 1.001
    result = bench.fingerprints([3.0, 2.0], means, changed)
    assert bench.compare(result, expected) == {"totals": False, "means": False, "select": False}
    # (the same entries in another order are the same matrix)
    unsorted = sp.csr_matrix((np.array([1.0, 2.0], dtype=np.float32), np.array([1, 0]), np.array([0, 1, 2])),
                             shape=(2, 2))
    assert bench.fingerprints([3.0, 1.0], np.ones((bench.TYPES, 2)), unsorted)["select"] == expected["select"]
