"""The ``pydaf`` command's surface (issue 23): no file or data set is replaced unless asked (``--overwrite``,
``overwrite=True``), a new destination's format is the one its name says (or ``--format``), ``convert`` and ``repack``
say what they wrote, ``--version``, a closed output pipe ends quietly, AnnData/MuData/10x files given to reading
commands are named with the command that converts them, every ``--help`` lists the registry's formats, and
``describe`` summarises values without repeating the read-only wrapper."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import anndata
import h5py
import numpy as np
import pytest

import pydaf
from pydaf.cli import main
from pydaf.formats.registry import FormatEntry, register_format, registered_formats, unregister_format
from pydaf.interop import anndata_as_daf, daf_as_h5ad, h5ad_as_daf
from pydaf.interop.convert import convert

from .julia_examples import FIXTURES

ROOT = Path(__file__).resolve().parent.parent
CANONICAL = FIXTURES / "anndata" / "anndata_canonical.h5ad"


def run(*arguments: str, **options) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pydaf.cli", *arguments], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)}, **options)


def cells(path: Path | str) -> str:
    """Julia's example cells data set, stored at ``path``."""
    daf = pydaf.open_daf(str(path), "w", name="cells!")
    pydaf.copy_all(daf, pydaf.example_cells_daf(), progress=False)
    daf.format.format_close()
    return str(path)


def canonical(folder: Path) -> Path:
    if not CANONICAL.exists():
        pytest.skip(f"missing the shared fixture: {CANONICAL}")
    path = folder / "canonical.h5ad"
    shutil.copyfile(CANONICAL, path)
    return path


def hidden(folder: Path) -> list[str]:
    return [path.name for path in folder.rglob(".*") if path.name != ".daf.lock"]


def helped(*arguments: str) -> str:
    output = io.StringIO()
    with contextlib.redirect_stdout(output), pytest.raises(SystemExit) as exited:
        main([*arguments, "--help"])
    assert exited.value.code == 0
    return output.getvalue()


# 1. No silent replacement.


def test_convert_refuses_to_replace_an_existing_h5ad(tmp_path):
    source = cells(tmp_path / "cells.h5df")
    target = canonical(tmp_path)  # an AnnData file with obsm/uns Daf never held
    before = target.read_bytes()
    refused = run("convert", source, str(target), "--obs-is", "cell", "--var-is", "gene", "--X-is", "UMIs",
                  "--no-progress")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr == (f"pydaf convert: error: the destination exists: {target}\n(to replace it, pass "
                              "--overwrite to the pydaf command, or overwrite=True in Python)\n")
    assert target.read_bytes() == before
    replaced = run("convert", source, str(target), "--obs-is", "cell", "--var-is", "gene", "--X-is", "UMIs",
                   "--no-progress", "--overwrite")
    assert replaced.returncode == 0, replaced.stderr
    assert replaced.stdout == f'wrote AnnData "{target}": 856 obs x 683 var, X, 0 layers, 2 obs and 1 var columns\n'
    with h5py.File(target, "r") as file:
        assert file["X"].shape == (856, 683) and len(file.get("obsm", {})) == 0
    assert hidden(tmp_path) == []


def test_daf_as_h5ad_replaces_a_file_only_with_overwrite(tmp_path):
    daf = pydaf.MemoryDaf(name="m!").add_axis("obs", ["A"]).add_axis("var", ["X"])
    daf.set_matrix("obs", "var", "X", np.array([[7.0]]))
    notes = tmp_path / "notes.h5df"
    notes.write_text("precious")
    with pytest.raises(pydaf.DafExistsError, match=r"the destination exists: .*notes\.h5df\n.*overwrite=True"):
        daf_as_h5ad(daf, notes, progress=False)
    assert notes.read_text() == "precious"
    daf_as_h5ad(daf, notes, overwrite=True, progress=False)
    with h5py.File(notes, "r") as file:
        assert file["X"][()].tolist() == [[7.0]]


@pytest.mark.parametrize("kind", ["h5df", "h5dfs group", "files", "zarr"])
def test_convert_replaces_a_daf_data_set_only_with_overwrite(tmp_path, kind):
    source = cells(tmp_path / "cells.h5df")
    destination = {"h5df": f"{tmp_path}/old.h5df", "h5dfs group": f"{tmp_path}/old.h5dfs#/group",
                   "files": f"{tmp_path}/old.daf", "zarr": f"{tmp_path}/old.daf.zarr"}[kind]
    old = pydaf.open_daf(destination, "w", name="old!").set_scalar("old", 1)
    old.format.format_close()
    del old
    with pytest.raises(pydaf.DafExistsError, match="pass --overwrite"):
        convert(source, destination, progress=False)
    assert pydaf.open_daf(destination).scalars_set() == {"old"}
    refused = run("convert", source, destination, "--no-progress")
    assert refused.returncode == 1 and refused.stderr.startswith(
        f"pydaf convert: error: the destination exists: {destination}\n")
    assert pydaf.open_daf(destination).scalars_set() == {"old"}
    replaced = run("convert", source, destination, "--no-progress", "--overwrite")
    assert replaced.returncode == 0, replaced.stderr
    written = pydaf.open_daf(destination)
    assert written.scalars_set() == {"organism", "reference"}
    assert written.get_matrix("cell", "gene", "UMIs").sum() == pydaf.example_cells_daf().get_matrix(
        "cell", "gene", "UMIs").sum()
    assert hidden(tmp_path) == []


def test_h5ad_as_daf_refuses_an_existing_destination(tmp_path):
    source = canonical(tmp_path)
    destination = tmp_path / "old.h5df"
    pydaf.H5df(destination, "w").set_scalar("old", 1).flush()
    with pytest.raises(pydaf.DafExistsError, match="the destination exists"):
        h5ad_as_daf(source, str(destination), progress=False)
    assert pydaf.open_daf(destination).scalars_set() == {"old"}
    with pytest.raises(pydaf.DafExistsError, match="overwrite=True"):
        anndata_as_daf(anndata.read_h5ad(source), str(destination))
    h5ad_as_daf(source, str(destination), progress=False, overwrite=True).close()
    assert "old" not in pydaf.open_daf(destination).scalars_set()
    anndata_as_daf(anndata.read_h5ad(source), str(destination), overwrite=True).close()
    assert "old" not in pydaf.open_daf(destination).scalars_set()


def test_tenx_as_daf_replaces_a_destination_only_with_overwrite(tmp_path):
    from pydaf.interop import tenx_as_daf

    from .test_tenx import write_v3

    source = tmp_path / "matrix.h5"
    write_v3(source)
    destination = tmp_path / "old.daf"
    pydaf.FilesDaf(destination, "w").set_scalar("old", 1)
    with pytest.raises(pydaf.DafExistsError, match="overwrite=True"):
        tenx_as_daf(source, str(destination), progress=False)
    assert pydaf.open_daf(destination).scalars_set() == {"old"}
    refused = run("convert", str(source), str(destination), "--no-progress")
    assert refused.returncode == 1 and refused.stderr.startswith(
        f"pydaf convert: error: the destination exists: {destination}\n")
    daf = tenx_as_daf(source, str(destination), overwrite=True, progress=False)
    assert not daf.has_scalar("old") and daf.axis_length("cell") == 7
    assert hidden(tmp_path) == []


def test_repack_and_demo_and_manifest_replace_only_with_overwrite(tmp_path):
    source = cells(tmp_path / "cells.h5df")
    target = tmp_path / "old.h5df"
    pydaf.H5df(target, "w").set_scalar("old", 1).flush()
    with pytest.raises(pydaf.DafExistsError):
        pydaf.repack(source, target, progress=False)
    refused = run("repack", source, str(target), "--no-progress")
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"pydaf repack: error: the destination exists: {target}\n")
    assert pydaf.open_daf(target).scalars_set() == {"old"}
    replaced = run("repack", source, str(target), "--no-progress", "--overwrite")
    assert replaced.returncode == 0, replaced.stderr
    assert replaced.stdout == f'wrote H5df "{target}": 4 axes, 5 vectors, 1 matrix, 2 scalars\n'
    assert pydaf.open_daf(target).scalars_set() == {"organism", "reference"}

    refused = run("demo", "--output", str(target), "--cells", "50", "--genes", "20", "--no-progress")
    assert refused.returncode == 1 and "pydaf demo: error: the destination exists" in refused.stderr
    assert pydaf.open_daf(target).scalars_set() == {"organism", "reference"}
    demo = run("demo", "--output", str(target), "--cells", "50", "--genes", "20", "--no-progress", "--overwrite")
    assert demo.returncode == 0, demo.stderr
    assert pydaf.open_daf(target).axis_length("cell") == 50

    notes = tmp_path / "notes.json"
    notes.write_text("precious")
    assert main(["manifest", source, "--output", str(notes)]) == 1
    assert notes.read_text() == "precious"
    assert main(["manifest", source, "--output", str(notes), "--overwrite"]) == 0
    assert '"UMIs"' in notes.read_text()
    assert hidden(tmp_path) == []


# 2. The format of a new destination.


@pytest.mark.parametrize("name", ["out.h5", "out.hdf5", "out.zarr", "out.zip", "out"])
def test_a_new_destination_whose_name_says_no_format_is_refused(tmp_path, name):
    source = canonical(tmp_path)
    result = run("convert", str(source), str(tmp_path / name), "--no-progress")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"pydaf convert: error: can't tell the format of the new data set: "
                                    f"{tmp_path / name}; the formats, by name: - H5df: ")
    assert "--format NAME" in result.stderr and len(result.stderr.splitlines()) == 2
    for entry in registered_formats():
        assert (f" - {entry.name}: " in result.stderr) != entry.read_only  # (HttpDaf only reads: never written)
    assert "- FilesDaf: a directory named x.daf" in result.stderr
    assert "- h5ad: an AnnData file (x.h5ad)" in result.stderr
    assert not (tmp_path / name).exists()
    with pytest.raises(pydaf.DafFormatError, match="can't tell the format"):
        convert(source, tmp_path / name, progress=False)


@pytest.mark.parametrize(("name", "format", "kind"), [("out.h5", "h5df", "H5df"), ("out.h5", "files", "FilesDaf"),
                                                      ("out", "FILES", "FilesDaf"), ("out.hdf5", "H5DF", "H5df")])
def test_format_names_the_destination_format(tmp_path, name, format, kind):
    source = cells(tmp_path / "cells.h5df")
    result = run("convert", source, str(tmp_path / name), "--format", format, "--no-progress")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f'wrote {kind} "{tmp_path / name}": 4 axes, 5 vectors, 1 matrix, 2 scalars\n'
    assert type(pydaf.open_daf(tmp_path / name).base).__name__ == kind  # and it opens again by its content


def test_a_format_that_needs_its_suffix_says_so(tmp_path):
    source = cells(tmp_path / "cells.h5df")
    result = run("convert", source, str(tmp_path / "out.zarr"), "--format", "zarr", "--no-progress")
    assert result.returncode == 1
    assert result.stderr.startswith(f"pydaf convert: error: can't parse as ZarrDaf path: {tmp_path / 'out.zarr'}; "
                                    "expected one of: ")
    assert sorted(os.listdir(tmp_path)) == ["cells.h5df"]


def test_format_must_agree_with_the_destination_name(tmp_path):
    source = cells(tmp_path / "cells.h5df")
    result = run("convert", source, str(tmp_path / "out.daf.zip"), "--format", "h5df", "--no-progress")
    assert result.returncode == 1
    assert result.stderr.startswith(f"pydaf convert: error: can't write the format: H5df; at: "
                                    f"{tmp_path / 'out.daf.zip'}\n")
    unknown = run("convert", source, str(tmp_path / "out.h5"), "--format", "loom", "--no-progress")
    assert unknown.returncode == 1 and unknown.stderr.startswith("pydaf convert: error: unknown format: loom\n")
    assert sorted(os.listdir(tmp_path)) == ["cells.h5df"]


def test_an_existing_directory_is_a_files_destination(tmp_path):
    source = cells(tmp_path / "cells.h5df")
    (tmp_path / "output").mkdir()
    result = run("convert", source, str(tmp_path / "output"), "--no-progress")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f'wrote FilesDaf "{tmp_path / "output"}": 4 axes, 5 vectors, 1 matrix, 2 scalars\n'


# 3. The command line.


def test_version():
    result = run("--version")
    assert result.returncode == 0 and result.stdout == f"pydaf {version('pydaf')}\n"


def test_output_into_a_closed_pipe_ends_quietly(tmp_path):
    source = cells(tmp_path / "cells.h5df")
    for arguments in (("describe", source), ("query", source, "@ cell : donor"), ("manifest", source)):
        read, write = os.pipe()
        os.close(read)  # the reader is gone before anything is written
        process = subprocess.Popen([sys.executable, "-m", "pydaf.cli", *arguments], stdout=write,
                                   stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
        os.close(write)
        stderr = process.stderr.read().decode()
        assert process.wait(timeout=300) == 1, stderr
        assert stderr == "", stderr


def test_describe_piped_into_head(tmp_path):
    path = tmp_path / "many.h5df"
    daf = pydaf.H5df(path, "w").add_axis("cell", ["A", "B"])
    for index in range(1500):
        daf.set_vector("cell", f"vector_with_a_long_name_{index:05d}", np.array([index, index + 1]))
    daf.flush()
    del daf
    result = subprocess.run(f"{sys.executable} -m pydaf.cli describe {path} | head -1", shell=True, capture_output=True,
                            text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.stdout == f"name: {path}\n" and result.stderr == ""


def test_reading_commands_name_anndata_mudata_and_10x_files(tmp_path):
    source = canonical(tmp_path)
    checked = run("check", str(source))  # one line per problem, on stdout
    assert checked.returncode == 1 and checked.stdout == (
        f"{source}: open: not a Daf data set but an AnnData file: {source}; (convert it first: pydaf convert {source} "
        f"{tmp_path / 'canonical.h5df'}; or in Python: pydaf.interop.h5ad_as_daf('{source}', "
        f"'{tmp_path / 'canonical.h5df'}'))\n")
    for command in ("describe", "query", "manifest"):
        result = run(command, str(source), *((". x",) if command == "query" else ()))
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert result.stderr == (f"pydaf {command}: error: not a Daf data set but an AnnData file: {source}\n"
                                 f"(convert it first: pydaf convert {source} {tmp_path / 'canonical.h5df'} or in "
                                 f"Python: pydaf.interop.h5ad_as_daf('{source}', '{tmp_path / 'canonical.h5df'}'))\n")
    mudata = tmp_path / "cells.h5mu"
    with h5py.File(mudata, "w") as file:
        file.attrs["encoding-type"] = "MuData"
        file.create_group("mod/rna")
        file.create_group("mod/atac")
    result = run("describe", str(mudata))
    assert result.returncode == 1 and result.stderr.startswith(
        f"pydaf describe: error: not a Daf data set but a MuData file: {mudata}\n(convert one of its modalities first: "
        "pydaf convert "
        f"{mudata} {tmp_path / 'cells.h5df'} --modality atac; its modalities: atac, rna ")
    from .test_tenx import write_v3

    tenx = tmp_path / "filtered_feature_bc_matrix.h5"
    write_v3(tenx)
    result = run("describe", str(tenx))
    assert result.returncode == 1 and result.stderr.startswith(
        f"pydaf describe: error: not a Daf data set but a 10x Cell Ranger matrix: {tenx}\n(convert it first: pydaf "
        f"convert {tenx} {tmp_path / 'filtered_feature_bc_matrix.h5df'} ")
    converted = run("convert", str(tenx), str(tmp_path / "filtered_feature_bc_matrix.h5df"), "--no-progress")
    assert converted.returncode == 0, converted.stderr
    assert converted.stdout.startswith(f'wrote H5df "{tmp_path / "filtered_feature_bc_matrix.h5df"}": 2 axes, ')


def test_every_help_lists_the_registered_formats():
    entry = register_format(FormatEntry("TestOnlyDaf", "a test-only path (x.testonly)",
                                        guess_can_open=lambda path: False, open=pydaf.open_daf,
                                        repack=lambda *arguments, **options: None))
    try:
        for command in ("describe", "query", "manifest", "check", "convert", "repack"):
            text = helped(command)
            for known in registered_formats():
                if command != "repack" or known.repack is not None:
                    assert f"{known.name}: " in text, (command, known.name)
            assert "TestOnlyDaf: a test-only path (x.testonly)" in text, command
        convert_help = helped("convert")
        assert "h5ad: an AnnData file (x.h5ad)" in convert_help and "--format" in convert_help
        assert "--overwrite" in convert_help and "--overwrite" in helped("repack") and "--overwrite" in helped("demo")
    finally:
        assert unregister_format("TestOnlyDaf") is entry
    query_help = helped("query")
    assert "help(pydaf.queries)" in query_help and "docs/queries.md in the repository" in query_help


def test_describe_summarises_values_once(tmp_path):
    path = tmp_path / "cells.h5df"
    daf = pydaf.H5df(path, "w", name="cells!").add_axis("cell", ["A", "B", "C", "D"]).add_axis("gene", ["X", "Y"])
    daf.set_vector("cell", "type", ["T", "B", "T", "NK"]).set_vector("cell", "score", [0.5, np.nan, 2.0, -1.0])
    daf.set_vector("cell", "sparse", pydaf.SparseVector(4, np.array([2]), np.array([5], np.int32)))
    daf.set_matrix("cell", "gene", "UMIs", np.array([[0, 1], [2, 0], [0, 0], [3, 4]], np.uint8))
    daf.flush()
    del daf
    for deep in ((), ("--deep",)):
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            assert main(["describe", str(path), *deep]) == 0
        text = output.getvalue()
        assert text.startswith(f"name: {path}") and text.split("\n")[1] == "type: H5df" and "ReadOnly" not in text
        assert "    type: 4 x Str (Dense); 3 distinct: T (2), B (1), NK (1)\n" in text
        assert "    score: 4 x Float64 (Dense); min -1, max 2, 1 NaN\n" in text
        assert "    sparse: 4 x Int32 (Sparse 1 (25%) [Int64]); min 0, max 5\n" in text
        assert text.count("UMIs: ") == 2  # the two layouts, each once (the wrapper is not described again)
