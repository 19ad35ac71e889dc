"""benchmarks/bench_views.py end to end on a small matrix (the real run is ≥ 1 GB): every mode runs in its own
process, the table has a column per mode, and every view's matrix is the mapped base matrix (or a slice of it). The
time limit is lifted: speed is the script's own check, not this test's."""

from __future__ import annotations

import os

from .benchmark_scripts import load_benchmark


def test_benchmark_script_end_to_end(tmp_path, capsys):
    bench = load_benchmark("bench_views")
    path = str(tmp_path / "small.h5df")
    assert bench.main(["--path", path, "--cells", "300", "--genes", "200", "--runs", "1", "--keep",
                       "--limit-ms", "10000"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("wrote ") and lines[1].split() == ["base", "view", "renamed", "slice"]
    rows = {line[:32].strip(): line[32:].split() for line in lines[2:12]}
    assert rows["shape"] == ["300", "x", "200"] * 3 + ["300", "x", "100"]
    assert rows["in a map of the file"] == ["yes"] * 4
    assert rows["the base's array (slice: of it)"] == ["yes"] * 4
    assert [line.split(":")[0] for line in lines[12:]] == ["check view", "check renamed", "check slice"]
    assert all(line.endswith("zero-copy yes: PASS") for line in lines[12:])
    assert bench._existing_shape(path) == (300, 200)  # kept, and reused by the next run
    assert bench.main(["--path", path, "--cells", "300", "--genes", "200", "--runs", "1", "--quiet",
                       "--limit-ms", "10000"]) == 0
    assert not capsys.readouterr().out.startswith("wrote ")
    assert not os.path.exists(path)  # removed without --keep
