"""benchmarks/bench_dafpy.py end to end on a small data set: every step runs as a fresh process through
``pydaf.dafpy`` (so each of its child scripts works), and the table has a row per step and side, the dafpy side
marked as not installed where juliacall is absent. Speed is the script's own report, not this test's."""

from __future__ import annotations

import importlib.util

from .benchmark_scripts import load_benchmark


def test_benchmark_script_end_to_end(tmp_path, capsys):
    bench = load_benchmark("bench_dafpy")
    path = str(tmp_path / "small.h5df")
    assert bench.main(["--path", path, "--cells", "300", "--genes", "40", "--repeats", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("data: 300 cells x 40 genes")
    assert lines[1].split() == ["step", "side", "best", "s", "median", "s", "pydaf", "speed"]
    assert [line.split()[:2] for line in lines[2:]] == [[step, side] for step in bench.STEPS
                                                        for side in ("pydaf", "dafpy")]
    for line in lines[2::2]:
        assert float(line.split()[2]) > 0
    has_dafpy = importlib.util.find_spec("juliacall") is not None and importlib.util.find_spec("dafpy") is not None
    assert all(("not installed" in line) != has_dafpy for line in lines[3::2])
