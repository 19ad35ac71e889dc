"""``--output PATH`` of the benchmark scripts: a run's full table goes to a results file too, after a header naming the
commit, the command and the machine; a second run is appended, never written over the first."""

from __future__ import annotations

import pathlib
import re

import pytest

from .benchmark_scripts import load_benchmark

BENCHMARKS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(path.stem for path in BENCHMARKS.glob("bench_*.py"))


def test_a_run_is_recorded_in_the_output_file(tmp_path, capsys):
    bench = load_benchmark("bench_files")
    output = tmp_path / "bench_files-run.md"
    options = ["--cells", "300", "--genes", "20", "--vectors", "5", "--repeats", "1", "--output", str(output)]
    assert bench.main(options) == 0
    printed = capsys.readouterr().out
    text = output.read_text()
    assert re.match(r"## \d{4}-\d\d-\d\d \d\d:\d\d UTC, commit [0-9a-f]{7,}\+?\n\n`bench_files\.py --cells 300 ", text)
    assert " cores, " in text.splitlines()[2] and "load " in text.splitlines()[2]
    table = text.split("```text\n", 1)[1].rsplit("```\n", 1)[0]
    assert table == printed and "open r+" in table and "build dense" in table
    assert bench.main(options) == 0  # appended to, never written over
    assert output.read_text().startswith(text) and output.read_text().count("```text\n") == 2


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_declares_the_option(script, capsys):
    bench = load_benchmark(script)
    with pytest.raises(SystemExit):
        bench.main(["--help"])
    assert "--output PATH" in capsys.readouterr().out
