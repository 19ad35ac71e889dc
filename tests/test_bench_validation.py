"""benchmarks/bench_validation.py end to end on a small matrix (the real run is ≥ 1 GB): a row per measured call, the
validation cost line, and the same matrix read with and without the validation."""

from __future__ import annotations

from .benchmark_scripts import load_benchmark


def test_benchmark_script_end_to_end(tmp_path, capsys):
    bench = load_benchmark("bench_validation")
    path = str(tmp_path / "small.h5df")
    assert bench.main(["--path", path, "--cells", "3000", "--genes", "200", "--repeats", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("wrote ") and lines[1].startswith("matrix 3,000 x 200, ")
    assert lines[2].split()[:4] == ["first", "call", "unchecked", "checked"]
    assert [line.split()[0] for line in lines[4:7]] == ["get_stored_matrix", "get_matrix", "RSS"]
    assert lines[7].startswith("validation: ") and lines[8] == "same matrix: yes"
    assert bench._shape(path) == (3000, 200)  # reused by the next run
