"""benchmarks/bench_h5df_writes.py end to end at a tiny scale, against this same checkout: every workload runs in
child processes of both checkouts and gets a row with both times and their ratio. (Speed is the script's own
report, not this test's.)"""

from __future__ import annotations

from .benchmark_scripts import load_benchmark


def test_benchmark_script_end_to_end(capsys):
    bench = load_benchmark("bench_h5df_writes")
    bench.main(["--scale", "0.001", "--repeats", "1", "--against", bench.REPOSITORY])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["workload", "this", "s", "against", "s", "this/against"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:]}
    assert list(rows) == list(bench.WORKLOADS)
    for this, against, ratio in rows.values():
        assert float(this) > 0 and float(against) > 0 and ratio.endswith("x") and float(ratio[:-1]) > 0
