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


def test_benchmark_script_measures_the_machine_limits(tmp_path, capsys):
    bench = load_benchmark("bench_h5ad_convert")
    path = str(tmp_path / "small.h5ad")
    assert bench.main(["--path", path, "--cells", "1000", "--genes", "200", "--repeats", "1", "--quiet",
                       "--limits"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[5] == "equal: yes" and lines[6].startswith("machine limit")
    labels = [line.split("  ")[0].strip() for line in lines[7:]]
    assert labels == ["read X with h5py into new memory", "populate an X-sized file map",
                      "bare numba transpose (populated memory)", "copy X's bytes (memory bandwidth)",
                      "floor of convert --relayout (convert + both)"]
    assert all(float(line.split("  ")[-1].split()[0].rstrip("x")) >= 0 for line in lines[7:])
    assert not list(tmp_path.glob("small.limits.tmp"))  # the scratch file is removed
