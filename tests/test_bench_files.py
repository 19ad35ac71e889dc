"""benchmarks/bench_files.py end to end on a small data set: every timed operation runs and is reported."""

from __future__ import annotations

from .benchmark_scripts import load_benchmark


def test_benchmark_script_end_to_end(capsys):
    bench = load_benchmark("bench_files")
    assert bench.main(["--cells", "300", "--genes", "20", "--vectors", "5", "--repeats", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["operation", "best"]
    assert [line[:12].strip() for line in lines[2:]] == ["open r", "open r+", "get dense", "get sparse", "get vector",
                                                         "set vector", "set dense", "build dense"]
    assert all(line.split()[-1] in ("µs", "ms") for line in lines[2:])
