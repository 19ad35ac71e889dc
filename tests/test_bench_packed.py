"""benchmarks/bench_packed.py end to end on small data (the real run is ≥ 1 GB): the slice and the random columns read
a small part of the whole packed property's bytes and equal its columns, and the packed demo H5df answers the query as
the flat one does. The size and speed targets are the script's own report, not this test's."""

from __future__ import annotations

import os

from .benchmark_scripts import load_benchmark


def test_benchmark_script_end_to_end(tmp_path, capsys):
    bench = load_benchmark("bench_packed")
    directory = str(tmp_path / "bench")
    arguments = ["--directory", directory, "--cells", "3000", "--genes", "400", "--entries", "300", "--demo-cells",
                 "600", "--demo-genes", "100", "--runs", "1"]
    assert bench.main(arguments) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("wrote ") and "120,000 entries" in lines[1]
    assert lines[2].split() == ["slice", "4", "genes", "random", "4", "genes", "whole", "property"]
    ratios = [float(value) for value in lines[5].split()[-3:]]
    assert lines[5].startswith("bytes read / whole") and ratios[2] == 1.0 and max(ratios[:2]) < 0.1
    http = lines.index(next(line for line in lines if line.startswith("slice 4 genes, ms")))
    assert lines[http].split()[4:] == ["local", "HttpDaf", "(127.0.0.1)", "http", "/", "local"]
    assert float(lines[http + 1].split()[-1]) > 0  # (the HTTP slice was read and equals the local one: PASS below)
    demo = http + 2
    assert lines[demo].startswith("demo H5df: 600 cells x 100 genes")
    sizes = lines[demo + 2].split()
    assert sizes[:3] == ["file", "size,", "bytes"] and int(sizes[4].replace(",", "")) < int(sizes[3].replace(",", ""))
    assert lines[demo + 4].endswith("PASS")
    assert lines[-1].startswith("check http slice: within 2x of local: ")
    assert os.path.isdir(os.path.join(directory, "umis-3000x400x300.daf"))  # kept, and reused by the next run
    assert bench.main([*arguments, "--remove"]) == 0
    assert not capsys.readouterr().out.startswith("wrote ")
    assert not os.path.exists(directory)
