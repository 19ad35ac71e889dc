"""benchmarks/bench_reorder.py end to end on small data sets (the real run is >= 1 GB per format): each operation runs
in its own process, the table has cp and reorder rows per format (a process's first reorder, and one with the kernels
loaded), the reordered matrices hold the values their entries name, and the data sets are removed unless kept.
Speed is the script's own report, not this test's."""

from __future__ import annotations

from .benchmark_scripts import load_benchmark


def test_benchmark_script_end_to_end(tmp_path, capsys):
    bench = load_benchmark("bench_reorder")
    directory = str(tmp_path / "small")
    options = ["--directory", directory, "--cells", "300", "--genes", "200", "--repeats", "1"]
    assert bench.main([*options, "--keep"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("data: 300 cells x 200 genes")
    assert lines[1].split()[:3] == ["format", "operation", "GB"]
    assert [line.split()[:2] for line in lines[2:14]] == [
        [kind, mode] for kind in ("h5df", "files", "zarr") for mode in ("cp", "cp+fsync", "reorder", "reorder-loaded")]
    assert lines[14] == "equal: h5df yes, files yes, zarr yes"
    assert lines[15].startswith("reorder at >= 50% of the copy's speed: h5df reorder ")
    assert lines[15].count("x of cp ") == 6 and lines[15].count("x of cp+fsync ") == 6
    assert all(bench._is_built(kind, f"{directory}/{name}", 300, 200) for kind, name in bench.FORMATS.items())
    assert bench.main([*options, "--formats", "files"]) == 0  # (reuses the kept data set, reordered again)
    assert capsys.readouterr().out.splitlines()[6] == "equal: files yes"
    assert sorted(path.name for path in (tmp_path / "small").iterdir()) == ["data.daf.zarr", "data.h5df"]
