"""The ``pydaf`` command, run as a real process."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import pydaf


def run(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pydaf.cli", *arguments], capture_output=True, text=True)


def test_demo_builds_and_reads_a_mapped_data_set(tmp_path):
    path = tmp_path / "demo.h5df"
    result = run("demo", "--output", str(path), "--cells", "500", "--genes", "80", "--no-progress")
    assert result.returncode == 0, result.stderr
    assert "UMIs: 500 x 80 x UInt16 in Columns (Sparse" in result.stdout
    assert "open (mapped, read-only):" in result.stdout
    daf = pydaf.H5df(path, "r")
    umis = daf.get_matrix("cell", "gene", "UMIs")
    assert f"@ cell @ gene :: UMIs >> Sum type Int64: {umis.sum()} in " in result.stdout
    assert 0.05 < umis.nnz / (500 * 80) < 0.15  # ~90% zeros
    np.testing.assert_array_equal(daf.get_vector("cell", "total_UMIs"), np.asarray(umis.sum(axis=1)).ravel())
    assert (daf.get_matrix("gene", "cell", "UMIs", relayout=False) != umis.T).nnz == 0
    again = tmp_path / "again.h5df"
    assert run("demo", "--output", str(again), "--cells", "500", "--genes", "80", "--no-progress").returncode == 0
    assert (pydaf.H5df(again, "r").get_matrix("cell", "gene", "UMIs") != umis).nnz == 0  # deterministic


def test_describe_and_repack(tmp_path):
    source, destination = tmp_path / "a.h5df", tmp_path / "b.h5df"
    daf = pydaf.H5df(source, "w", name="a!").add_axis("cell", ["x", "y"]).set_vector("cell", "v", [1.5, 2.5])
    daf.set_vector("cell", "v", [3.5, 4.5], overwrite=True)
    daf.flush()
    del daf
    described = run("describe", str(source))
    assert described.returncode == 0
    assert described.stdout.startswith(f"name: {source}\ntype: H5df\nroot: HDF5.File: (read-only) {source}\nmode: r\n")
    assert "    v: 2 x Float64 (Dense); min 3.5, max 4.5\n" in described.stdout
    repacked = run("repack", str(source), str(destination), "--no-progress")
    assert repacked.returncode == 0, repacked.stderr
    assert repacked.stdout == f'wrote H5df "{destination}": 1 axis, 1 vector, 0 matrices, 0 scalars\n'
    assert pydaf.H5df(destination, "r").get_vector("cell", "v").tolist() == [3.5, 4.5]


def test_query_prints_the_result(tmp_path):
    path = tmp_path / "q.h5df"
    daf = pydaf.H5df(path, "w", name="q!").add_axis("cell", ["x", "y", "z"])
    daf.set_vector("cell", "age", np.array([30, 70, 65], np.uint8))
    daf.flush()
    del daf
    result = run("query", str(path), "@ cell [ age > 60 ] : age >> Sum")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "135"
    result = run("query", str(path), "@ cell [ age > 60 ]")
    assert result.stdout.split()[:5] == ["cell", "y", "y", "z", "z"]
    failed = run("query", str(path), "@ cell : height")
    assert failed.returncode == 1 and "missing vector: height" in failed.stderr


def test_errors_are_reported_without_a_traceback(tmp_path):
    result = run("describe", str(tmp_path / "missing.h5df"))
    assert result.returncode == 1
    assert result.stderr.startswith("pydaf describe: error: missing H5df file:") and "Traceback" not in result.stderr


def test_commands_open_every_format_through_the_registry(backend, tmp_path):
    path = backend.path(tmp_path)
    if path is None:
        pytest.skip(f"the backend: {backend} has no path for a command to open")
    daf = pydaf.open_daf(path, "w", name="any!").set_scalar("name", "any!").add_axis("cell", ["x", "y"])
    daf.set_vector("cell", "age", np.array([30, 70], np.uint8))
    del daf
    described = run("describe", path)
    assert described.returncode == 0, described.stderr
    assert described.stdout.startswith("name: any!\ntype: ")
    assert "ReadOnly" not in described.stdout
    assert "age: 2 x UInt8 (Dense); min 30, max 70\n" in described.stdout
    queried = run("query", path, "@ cell : age >> Sum")
    assert queried.returncode == 0, queried.stderr
    assert queried.stdout.strip() == "100"


def test_unknown_paths_list_the_known_formats(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("not a data set\n")
    for arguments in (("describe", str(notes)), ("query", str(notes), ". name"),
                      ("convert", str(notes), str(tmp_path / "out.h5df"))):
        result = run(*arguments)
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert result.stderr.startswith(f"pydaf {arguments[0]}: error: no known Daf format can open the path: "
                                        f"{notes}; the known formats are: - H5df: ")
        assert ("; - AnnData: an .h5ad file (for convert)" in result.stderr) == (arguments[0] == "convert")
    assert not (tmp_path / "out.h5df").exists()


def test_repack_applies_only_to_formats_that_have_it(tmp_path):
    pydaf.FilesDaf(tmp_path / "x.daf", "w").set_scalar("x", 1)
    result = run("repack", str(tmp_path / "x.daf"), str(tmp_path / "y.daf"))
    assert result.returncode == 1
    assert result.stderr == (f"pydaf repack: error: can't repack the FilesDaf data set: {tmp_path / 'x.daf'}\n"
                             "(only these formats can be repacked: H5df)\n")
    assert not (tmp_path / "y.daf").exists()
