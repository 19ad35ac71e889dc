"""benchmarks/bench_concat.py end to end on small sources (the real run is ≥ 1 GB), dense and sparse: each operation
runs in its own process, the table has a row per operation, and the concatenated matrix matches the sources."""

from __future__ import annotations

import pytest

from .benchmark_scripts import load_benchmark


@pytest.mark.parametrize("sparse", [False, True])
def test_benchmark_script_end_to_end(tmp_path, capsys, sparse):
    bench = load_benchmark("bench_concat")
    prefix = str(tmp_path / "small")
    options = ["--path", prefix, "--cells", "300", "--genes", "200", "--repeats", "1"] + ["--sparse"] * sparse
    assert bench.main(options) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("data: 2 sources of 300 x 200 " + ("sparse" if sparse else "dense"))
    assert lines[1].split()[:3] == ["operation", "best", "s"]
    assert [line.split()[0] for line in lines[2:4]] == ["cp", "concatenate"] and lines[4] == "equal: yes"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["small.0.h5df", "small.1.h5df"]  # outputs removed
    assert bench._is_built(bench._source_paths(prefix, 2), bench._description(300, 200, sparse, 0.02))  # reused
