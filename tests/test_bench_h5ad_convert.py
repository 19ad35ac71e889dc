"""benchmarks/bench_h5ad_convert.py end to end on a small h5ad (the real run is ≥ 1 GB): every operation runs in its
own process, the table has a row per operation, and the converted file matches the h5ad."""

from __future__ import annotations

import pytest

from .benchmark_scripts import load_benchmark

pytest.importorskip("anndata")


def test_benchmark_script_end_to_end(tmp_path, capsys):
    bench = load_benchmark("bench_h5ad_convert")
    path = str(tmp_path / "small.h5ad")
    assert bench.main(["--path", path, "--cells", "2000", "--genes", "300", "--repeats", "1", "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["operation", "best", "s"]
    assert [line.split()[0] for line in lines[1:4]] == ["read_h5ad", "convert", "convert"]
    assert lines[3].startswith("convert --relayout")
    assert lines[4].startswith("X in memory:") and lines[5] == "equal: yes"
    assert bench._shape(path) == (2000, 300)  # Reused by the next run.
    assert not list(tmp_path.glob("small.*.h5df"))  # The converted files were cleaned up.
