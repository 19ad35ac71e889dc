"""The Julia bridge (``pydaf.julia``) and the ``julia/`` kit.

Without Julia (what runs everywhere): finding Julia with fake ``PATH``\\ s and environments (real processes answer
``julia --version``), refusing to download one, the error messages, the laziness of the imports, and the plan of
``to_julia`` for every backend (which Julia constructor and path, or which buffers a Julia ``MemoryDaf`` wraps,
zero-copy).

With Julia (``pydaf.julia.julia_unavailable_reason()`` is ``None``): every shared parity case evaluated by pydaf and by
Julia on the same data and compared (and both with the recorded result), Julia's example data sets against pydaf's,
every backend handed over both ways (Julia's manifest of the handed-over data equals pydaf's), zero-copy asserted by
addresses in both directions, the conformance suite on a Julia ``MemoryDaf`` read and written through
``from_julia``, ``julia/verify.jl`` run on pydaf-written data, and the data sets ``julia/make_fixtures.jl`` wrote
(``PYDAF_JULIA_FIXTURES``, default ``../shared/fixtures/julia/pydaf-kit``) read by pydaf as Julia's manifests say and
queried with Julia's results. Each of these test functions skips once, with the reason, where Julia (or the kit's
output) is missing.
"""

from __future__ import annotations

import gc
import importlib.metadata
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import pydaf
import pydaf.cli
import pydaf.queries
from pydaf import SparseMatrixCSC, SparseVector
from pydaf.formats.registry import guess_format, registered_formats
from pydaf.julia import (
    ArrayForm,
    DafJuliaError,
    DafJuliaUnavailableError,
    JuliaMemoryPlan,
    JuliaOpenPlan,
    JuliaSetup,
    find_julia,
    from_julia,
    julia_plan,
    julia_query,
    julia_unavailable_reason,
    juliacall_environment,
    start_julia,
    to_julia,
)
from pydaf.julia.handoff import query_result_value, stored_value
from pydaf.julia.plan import STORED_FORMATS, array_plan
from pydaf.julia.setup import KIT
from pydaf.manifest import daf_manifest, manifest_differences
from pydaf.testing import DafBackend, DafConformance, is_file_map

from .julia_examples import FIXTURES
from .parity import (
    apply_setup_ops,
    assert_api_result,
    assert_doctest_result,
    assert_error_message,
    assert_inline_result,
    cached_example,
    dense_frame,
    doctest_query_call,
    eval_builder,
    fresh_example,
    julia_dtype,
    load_cases,
    run_api_call,
)
from .test_manifest import fill_sample, manifest_backends

REPOSITORY = Path(__file__).resolve().parents[1]
REASON = julia_unavailable_reason()


def _brief(reason: str) -> str:
    """A reason short enough for a skip line (the full text: ``pydaf.julia.julia_unavailable_reason()``)."""
    first = reason.splitlines()[0]
    return first if len(first) <= 150 else first[:150] + "…"


needs_julia = pytest.mark.skipif(REASON is not None, reason=f"Julia is not available: {_brief(REASON or '')}")

try:
    JULIA: JuliaSetup | None = find_julia()
except DafJuliaUnavailableError as error:
    JULIA, JULIA_REASON = None, str(error)
else:
    JULIA_REASON = "" if (KIT / "Manifest.toml").is_file() else f"the kit is not instantiated: {KIT}"
needs_julia_kit = pytest.mark.skipif(JULIA is None or bool(JULIA_REASON),
                                     reason=f"Julia and the instantiated kit are needed: {_brief(JULIA_REASON)}")

KIT_OUTPUT = Path(os.environ.get("PYDAF_JULIA_FIXTURES") or FIXTURES / "julia" / "pydaf-kit")
needs_kit_output = pytest.mark.skipif(
    not (KIT_OUTPUT / "kit.json").is_file(),
    reason=f"no Julia-written kit at {KIT_OUTPUT} (julia/make_fixtures.jl writes it: see julia/README.md)")


# Finding Julia, without Julia.


def _fake_julia(path: Path, output: str) -> Path:
    """A real executable that answers ``--version`` like Julia would (or doesn't)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '{output}'\n")
    path.chmod(0o755)
    return path


def _instantiated_project(directory: Path) -> Path:
    """A project whose manifest holds the PythonCall the installed juliacall (else the pinned one) runs with."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "Project.toml").write_text('[deps]\nDataAxesFormats = "1375bf9c-a47d-45a1-aad5-626dd8629d98"\n')
    try:
        pythoncall = importlib.metadata.version("juliacall")
    except importlib.metadata.PackageNotFoundError:
        pythoncall = "0.9.37"
    (directory / "Manifest.toml").write_text(f'manifest_format = "2.0"\n\n[[deps.PythonCall]]\nuuid = '
                                             f'"6099a3de-0909-46bc-b1f4-468b9a2dfc0d"\nversion = "{pythoncall}"\n')
    return directory


@pytest.fixture
def fakes(tmp_path: Path) -> dict[str, Any]:
    """Fake Julias (real executables), a project, and an environment that finds nothing else."""
    bin_directory = tmp_path / "bin"
    on_path = _fake_julia(bin_directory / "julia", "julia version 1.12.2")
    other = _fake_julia(tmp_path / "opt" / "julia-1.13.5" / "bin" / "julia", "julia version 1.13.5")
    project = _instantiated_project(tmp_path / "project")
    environ = {"PATH": str(bin_directory), "PYDAF_JULIA_PROJECT": str(project),
               "PYTHON_JULIAPKG_PROJECT": str(tmp_path / "no-juliapkg")}
    return {"on_path": on_path, "other": other, "project": project, "environ": environ, "tmp": tmp_path}


def test_finds_julia_on_path_with_its_version_and_project(fakes):
    setup = find_julia(fakes["environ"], xoptions={})
    assert setup == JuliaSetup(os.path.realpath(fakes["on_path"]), (1, 12, 2), "PATH", str(fakes["project"]),
                               f"PYDAF_JULIA_PROJECT={fakes['project']}")


def test_settings_come_before_path_in_juliacalls_order(fakes):
    other, environ = str(fakes["other"]), fakes["environ"]
    assert find_julia({**environ, "PYTHON_JULIAPKG_EXE": other}, xoptions={}).source == \
        f"PYTHON_JULIAPKG_EXE={other}"
    found = find_julia({**environ, "PYTHON_JULIACALL_EXE": other, "PYTHON_JULIAPKG_EXE": str(fakes["on_path"])},
                       xoptions={})
    assert (found.executable, found.version, found.source) == (other, (1, 13, 5), f"PYTHON_JULIACALL_EXE={other}")
    found = find_julia(environ, xoptions={"juliacall-exe": other})
    assert (found.executable, found.source) == (other, f"-X juliacall-exe={other}")
    # A name on PATH is allowed (juliacall looks it up the same way).
    assert find_julia({**environ, "PYTHON_JULIACALL_EXE": "julia"}, xoptions={}).executable == \
        os.path.realpath(fakes["on_path"])


def test_a_julia_juliapkg_already_has_is_used_but_never_installed(fakes):
    juliapkg_project = fakes["tmp"] / "juliapkg-project"
    (juliapkg_project / "pyjuliapkg").mkdir(parents=True)
    (juliapkg_project / "pyjuliapkg" / "meta.json").write_text(json.dumps({"executable": str(fakes["other"])}))
    environ = {**fakes["environ"], "PYTHON_JULIAPKG_PROJECT": str(juliapkg_project)}
    found = find_julia(environ, xoptions={})
    assert found.executable == str(fakes["other"]) and found.source.startswith("juliapkg's resolved Julia")
    (juliapkg_project / "pyjuliapkg" / "meta.json").unlink()
    installed = _fake_julia(juliapkg_project / "pyjuliapkg" / "install" / "bin" / "julia", "julia version 1.12.0")
    found = find_julia(environ, xoptions={})
    assert (found.executable, found.version, found.source) == (str(installed), (1, 12, 0),
                                                              "juliapkg's installed Julia")
    assert sorted(path.name for path in (juliapkg_project / "pyjuliapkg").iterdir()) == ["install"]  # untouched


def test_symbolic_links_are_resolved(fakes):
    link_directory = fakes["tmp"] / "links"
    link_directory.mkdir()
    (link_directory / "julia").symlink_to(fakes["other"])
    found = find_julia({**fakes["environ"], "PATH": str(link_directory)}, xoptions={})
    assert found.executable == str(fakes["other"])  # juliacall finds libjulia next to the real binary


def test_no_julia_is_a_clear_error(fakes):
    empty = fakes["tmp"] / "empty"
    empty.mkdir()
    with pytest.raises(DafJuliaUnavailableError) as error:
        find_julia({**fakes["environ"], "PATH": str(empty)}, xoptions={})
    assert str(error.value) == (
        "no Julia found: PYTHON_JULIACALL_EXE and PYTHON_JULIAPKG_EXE are not set, juliapkg has no Julia, and there "
        f"is no julia on PATH: {empty}\n(pydaf never lets juliacall download Julia: install Julia "
        "(https://julialang.org/downloads) and put it on PATH, or set PYTHON_JULIACALL_EXE to it)")
    assert isinstance(error.value, pydaf.DafError)


def test_a_bad_setting_is_not_silently_replaced_by_path(fakes):
    missing = str(fakes["tmp"] / "nowhere" / "julia")
    with pytest.raises(DafJuliaUnavailableError, match=re.escape(f"no Julia executable at: PYTHON_JULIACALL_EXE="
                                                                 f"{missing}\n(pydaf never downloads Julia")):
        find_julia({**fakes["environ"], "PYTHON_JULIACALL_EXE": missing}, xoptions={})


def test_old_julias_and_other_programs_are_refused(fakes):
    old = _fake_julia(fakes["tmp"] / "old" / "julia", "julia version 1.11.7")  # DataAxesFormats 0.3.0 needs 1.12
    with pytest.raises(DafJuliaUnavailableError,
                       match=r"(?s)Julia 1\.11\.7 is too old: .*DataAxesFormats 0\.3\.0 needs Julia 1\.12 or later"):
        find_julia({**fakes["environ"], "PYTHON_JULIACALL_EXE": str(old)}, xoptions={})
    impostor = _fake_julia(fakes["tmp"] / "impostor" / "julia", "hello")
    with pytest.raises(DafJuliaUnavailableError, match=r"not a Julia executable: .*impostor/julia\nfound by: PATH"):
        find_julia({**fakes["environ"], "PATH": str(impostor.parent)}, xoptions={})


def test_the_project_must_be_instantiated(fakes):
    bare = fakes["tmp"] / "bare"
    bare.mkdir()
    (bare / "Project.toml").write_text("[deps]\n")
    with pytest.raises(DafJuliaUnavailableError) as error:
        find_julia({**fakes["environ"], "PYTHON_JULIACALL_PROJECT": str(bare)}, xoptions={})
    assert str(error.value) == (f"the Julia project is not instantiated (no Manifest.toml): {bare}\nchosen by: "
                                f"PYTHON_JULIACALL_PROJECT={bare}\n(run: julia --project={bare} -e 'using Pkg; "
                                "Pkg.instantiate()')")
    with pytest.raises(DafJuliaUnavailableError, match="not a Julia project"):
        find_julia({**fakes["environ"], "PYDAF_JULIA_PROJECT": str(fakes["tmp"])}, xoptions={})
    environ = {key: value for key, value in fakes["environ"].items() if key != "PYDAF_JULIA_PROJECT"}
    if (KIT / "Manifest.toml").is_file():  # someone instantiated the kit here
        assert find_julia(environ, xoptions={}).project == str(KIT)
    else:
        with pytest.raises(DafJuliaUnavailableError, match=re.escape(f"not instantiated (no Manifest.toml): {KIT}")):
            find_julia(environ, xoptions={})


def test_the_environment_pins_that_julia_and_forbids_installing(fakes):
    setup = find_julia(fakes["environ"], xoptions={})
    assert juliacall_environment(setup, {}) == {
        "PYTHON_JULIACALL_EXE": setup.executable, "PYTHON_JULIACALL_PROJECT": str(fakes["project"]),
        "PYTHON_JULIAPKG_EXE": setup.executable, "PYTHON_JULIAPKG_PROJECT": str(fakes["project"]),
        "PYTHON_JULIAPKG_OFFLINE": "yes", "PYTHON_JULIACALL_HANDLE_SIGNALS": "yes"}
    assert juliacall_environment(setup, {"PYTHON_JULIACALL_HANDLE_SIGNALS": "no"})[
        "PYTHON_JULIACALL_HANDLE_SIGNALS"] == "no"


def _run_python(code: str, environ: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**environ, "PYTHONPATH": str(REPOSITORY)}, cwd=REPOSITORY)


def test_without_julia_nothing_is_imported_downloaded_or_written(tmp_path):
    home, empty = tmp_path / "home", tmp_path / "empty"
    home.mkdir()
    empty.mkdir()
    code = """
import sys, pydaf, pydaf.julia
try:
    pydaf.julia.to_julia(pydaf.MemoryDaf(name="x!"))
except pydaf.julia.DafJuliaUnavailableError as error:
    print(str(error).splitlines()[0].split(":")[0])
print(sorted(module for module in sys.modules if module.startswith(("juliacall", "juliapkg"))))
"""
    result = _run_python(code, {"PATH": str(empty), "HOME": str(home), "PYTHON_JULIAPKG_PROJECT": str(tmp_path / "j")})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["no Julia found", "[]"]
    assert list(home.iterdir()) == [] and not (tmp_path / "j").exists()


@pytest.mark.skipif(REASON is None or "juliacall" in sys.modules or __import__("importlib").util.find_spec(
    "juliacall") is not None, reason="juliacall is installed here (this checks the error when it is not)")
def test_without_juliacall_the_error_says_how_to_install_it(fakes):
    code = """
import os, pydaf.julia
try:
    pydaf.julia.start_julia()
except pydaf.julia.DafJuliaUnavailableError as error:
    print(error)
print("PYTHON_JULIACALL_EXE" in os.environ)
"""
    result = _run_python(code, {**fakes["environ"], "HOME": str(fakes["tmp"])})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["juliacall is not installed", "(pip install 'pydaf[julia]')", "False"]


def test_imports_are_lazy():
    code = """
import sys, pydaf
print(sorted(module for module in sys.modules if module == "pydaf.julia" or module.startswith(
    ("pydaf.julia.", "juliacall", "juliapkg"))))
import pydaf.julia
print(sorted(module for module in sys.modules if module.startswith(("juliacall", "juliapkg"))))
"""
    result = _run_python(code, dict(os.environ))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["[]", "[]"]


# The plan of to_julia, without Julia.

_EXPECTED_CONSTRUCTORS = {"memory": None, "chain": None, "h5df": "H5df", "h5df_group": "H5df", "files": "FilesDaf",
                          "ZarrDaf": "ZarrDaf"}


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def _stored_parts(daf: pydaf.DafReader, axes: tuple[str, ...], name: str) -> list[np.ndarray]:
    if len(axes) == 1:
        stored = daf.get_stored_vector(axes[0], name)
    else:
        stored = daf.get_stored_matrix(*axes, name, relayout=False)
    if isinstance(stored, SparseVector):
        return [stored.nzind, stored.nzval]
    if isinstance(stored, SparseMatrixCSC):
        return [stored.colptr, stored.rowval, stored.nzval]
    return [stored]


def _assert_memory_plan(plan: JuliaMemoryPlan, daf: pydaf.DafReader, *, mapped: bool) -> None:
    manifest = daf_manifest(daf)
    assert plan.name == daf.name
    assert [name for name, _ in plan.scalars] == sorted(manifest["scalars"])
    assert [(axis, list(entries)) for axis, entries in plan.axes] == [
        (axis, list(daf.axis_vector(axis))) for axis in sorted(manifest["axes"])]
    expected_arrays = {((axis,), name) for axis, vectors in manifest["vectors"].items() for name in vectors}
    expected_arrays |= {((rows, columns), name) for rows, layouts in manifest["matrices"].items()
                        for columns, names in layouts.items() for name in names}
    assert {(array.axes, array.name) for array in plan.arrays} == expected_arrays
    for array in plan.arrays:
        stored = _stored_parts(daf, array.axes, array.name)
        if array.form is ArrayForm.STRINGS:
            assert array.eltype == "String" and not array.zero_copy
            continue
        assert array.zero_copy, (array.axes, array.name)
        assert [_address(buffer.array) for buffer in array.buffers] == [_address(part) for part in stored]
        assert all(buffer.array.flags.f_contiguous for buffer in array.buffers)
        if mapped and array.form is ArrayForm.DENSE and array.buffers[0].array.size:
            assert is_file_map(array.buffers[0].array), (array.axes, array.name)


@pytest.mark.parametrize("backend", manifest_backends(), ids=str)
def test_the_plan_of_each_backend(backend, tmp_path):
    daf = fill_sample(backend.new(tmp_path, "plan!"))
    reader = backend.reopen(daf, "r")
    plan = julia_plan(reader)
    expected = _EXPECTED_CONSTRUCTORS.get(backend.name, STORED_FORMATS.get(reader.format.type_name))
    if expected is None:
        assert isinstance(plan, JuliaMemoryPlan)
        _assert_memory_plan(plan, reader, mapped=backend.maps_files)
        return
    assert plan == JuliaOpenPlan(expected, reader.complete_path(), reader.name)
    assert guess_format(plan.path).name == reader.format.type_name  # the same storage, found again by its path
    if backend.name == "h5df_group":
        assert plan.path.endswith(".h5dfs#/nested/group")  # Julia's H5df takes the same `#/group` form
    in_memory = julia_plan(reader, in_memory=True)
    assert isinstance(in_memory, JuliaMemoryPlan)
    _assert_memory_plan(in_memory, reader, mapped=backend.maps_files)


def test_a_writable_h5df_is_not_handed_over_by_path(tmp_path):
    daf = pydaf.H5df(tmp_path / "open.h5df", "w", name="open!").set_scalar("x", 1)
    with pytest.raises(pydaf.DafLockedError) as error:
        julia_plan(daf)
    assert str(error.value) == (
        f"can't hand the H5df file: {tmp_path / 'open.h5df'}\nto Julia while this process has it open for writing "
        "(Julia would read it as it is being written)\n(reopen it read-only, or use to_julia(..., "
        "in_memory=True))\nin the daf data: open!")
    assert isinstance(julia_plan(daf, in_memory=True), JuliaMemoryPlan)
    sharing = pydaf.H5df(tmp_path / "open.h5df", "r")  # read-only, but sharing the writer's read-write HDF5 file
    with pytest.raises(pydaf.DafLockedError, match="while this process has it open for writing"):
        julia_plan(sharing)
    del daf, sharing, error  # (the error's traceback holds the data set too)
    gc.collect()
    assert isinstance(julia_plan(pydaf.H5df(tmp_path / "open.h5df", "r")), JuliaOpenPlan)  # once all are closed
    assert isinstance(julia_plan(pydaf.FilesDaf(tmp_path / "open.daf", "w")), JuliaOpenPlan)  # no such lock


def test_buffers_julia_cannot_take_as_they_are_are_copied():
    c_order = np.arange(6.0).reshape(2, 3)
    plan = array_plan(("cell", "gene"), "c", c_order)
    assert (plan.form, plan.zero_copy) == (ArrayForm.DENSE, False)
    np.testing.assert_array_equal(plan.buffers[0].array, c_order)
    assert plan.buffers[0].array.flags.f_contiguous
    strided = np.arange(10, dtype=np.int16)[::2]
    plan = array_plan(("cell",), "s", strided)
    assert not plan.zero_copy and plan.buffers[0].array.tolist() == [0, 2, 4, 6, 8]
    big_endian = np.arange(3, dtype=">u4")
    plan = array_plan(("cell",), "b", big_endian)
    assert not plan.zero_copy and plan.buffers[0].array.dtype == np.dtype("<u4") and plan.eltype == "UInt32"
    mixed = SparseMatrixCSC((3, 2), np.array([1, 2, 3], np.int64), np.array([1, 3], np.int32),
                            np.array([1.5, 2.5]))
    plan = array_plan(("cell", "gene"), "m", mixed)  # Julia's SparseMatrixCSC{Tv, Ti} has one index type
    assert [buffer.copied for buffer in plan.buffers] == [False, True, False]
    assert [buffer.array.dtype for buffer in plan.buffers] == [np.dtype(np.int64)] * 2 + [np.dtype(np.float64)]
    narrow = SparseVector(300, np.array([1, 200], np.uint8), np.array([True, True]))  # Julia stores 300 as Ti
    plan = array_plan(("cell",), "v", narrow)
    assert plan.buffers[0].copied and np.iinfo(plan.buffers[0].array.dtype).max >= 300
    assert plan.buffers[0].array.tolist() == [1, 200] and not plan.buffers[1].copied


def test_julia_forms_become_pydafs_stored_forms():
    """What the bridge returns (``bridge.jl``'s ``stored_form``, ``result_form``), as plain Python values here."""
    dense, group = stored_value(("dense", False, (2, 3), np.asfortranarray(np.arange(6.0).reshape(2, 3))), "x")
    assert dense.shape == (2, 3) and group is pydaf.CacheGroup.MappedData
    sparse, group = stored_value(("sparse", True, (3,), np.array([2], np.uint32), np.array([1.5])), "x")
    assert isinstance(sparse, SparseVector) and sparse.to_dense().tolist() == [0.0, 1.5, 0.0]
    assert group is pydaf.CacheGroup.MemoryData
    strings, _ = stored_value(("strings", True, (2, 2), ["a", "b", "", "d"]), "x")
    assert strings.dtype == object and strings.tolist() == [["a", ""], ["b", "d"]]  # column-major
    assert query_result_value(("names", ["B", "A"])) == {"A", "B"}
    scalar = query_result_value(("scalar", 7, "UInt16"))
    assert scalar == 7 and scalar.dtype == np.uint16
    series = query_result_value(("vector", None, ["x", "y"], "dense", False, (2,), np.array([1, 2], np.int64)))
    assert series.index.name is None and series.to_dict() == {"x": 1, "y": 2}
    frame = query_result_value(("matrix", "cell", "gene", ["A"], ["X", "Y"], "sparse", False, (1, 2),
                                np.array([1, 2, 2], np.int64), np.array([1], np.int64), np.array([5.0])))
    assert (frame.index.name, frame.columns.name) == ("cell", "gene")
    assert dense_frame(frame).to_numpy().tolist() == [[5.0, 0.0]]
    with pytest.raises(pydaf.DafTypeError, match="element type of x"):
        stored_value(("dense", False, (1,), np.array([1 + 1j])), "x")


# With Julia: the parity cases, evaluated by both.


def _values_dtype(data: pd.Series | pd.DataFrame) -> np.dtype:
    dtypes = [data.dtype] if isinstance(data, pd.Series) else list(data.dtypes)
    dtypes = [dtype.subtype if isinstance(dtype, pd.SparseDtype) else dtype for dtype in dtypes]
    return np.dtype(dtypes[0]) if dtypes else np.dtype(object)


def _assert_close(ours: np.ndarray, theirs: np.ndarray, what: str) -> None:
    assert ours.shape == theirs.shape, f"{what}: shape {ours.shape} != Julia's {theirs.shape}"
    if ours.dtype.kind == "f":
        tolerance = 1e-5 if ours.dtype == np.float32 else 1e-12  # summation orders differ
        np.testing.assert_allclose(ours, theirs, rtol=tolerance, atol=0, equal_nan=True, err_msg=what)
    else:
        assert ours.tolist() == theirs.tolist(), f"{what}: {ours.tolist()} != Julia's {theirs.tolist()}"


def assert_same_result(ours: Any, theirs: Any, what: str = "result") -> None:
    """pydaf's result and Julia's (through :func:`julia_query`) are the same: kind, entry and dimension names, element
    type and values (floats to the rounding of their type)."""
    if isinstance(theirs, set):
        assert isinstance(ours, set) and ours == theirs, f"{what}: {ours!r} != Julia's {theirs!r}"
    elif isinstance(theirs, pd.Series | pd.DataFrame):
        assert type(ours) is type(theirs), f"{what}: a {type(ours).__name__}, Julia's is a {type(theirs).__name__}"
        assert list(ours.index) == list(theirs.index) and ours.index.name == theirs.index.name, what
        if isinstance(theirs, pd.DataFrame):
            assert list(ours.columns) == list(theirs.columns) and ours.columns.name == theirs.columns.name, what
        assert _values_dtype(ours) == _values_dtype(theirs), f"{what}: {_values_dtype(ours)} != Julia's " \
                                                             f"{_values_dtype(theirs)}"
        _assert_close(dense_frame(ours).to_numpy() if isinstance(ours, pd.DataFrame) else ours.to_numpy(),
                      dense_frame(theirs).to_numpy() if isinstance(theirs, pd.DataFrame) else theirs.to_numpy(), what)
    elif isinstance(theirs, str):
        assert isinstance(ours, str) and ours == theirs, f"{what}: {ours!r} != Julia's {theirs!r}"
    else:
        assert np.asarray(ours).dtype == np.asarray(theirs).dtype, f"{what}: {ours!r} != Julia's {theirs!r}"
        _assert_close(np.asarray(ours), np.asarray(theirs), what)


# Test-only Julia: evaluating the recorded Julia expressions (builder queries, get_frame calls, doctest calls).
JULIA_TEST_HELPERS = r"""
function recorded_expression(expression::AbstractString)::Any
    return Core.eval(@__MODULE__, Meta.parse(expression))
end

function canonical_query_text(expression::AbstractString)::String
    return string(recorded_expression(expression))
end

function builder_query_form(daf::DafReader, expression::AbstractString)::Tuple
    return result_form(get_query(daf, recorded_expression(expression); cache = false))
end

function error_text(action::Function)::Union{String, Nothing}
    try
        action()
        return nothing
    catch error
        return sprint(showerror, error)
    end
end

function parse_error_text(text::AbstractString)::Union{String, Nothing}
    return error_text(() -> parse_query(text))
end

function frame_form(daf::DafReader, expression::AbstractString)::Tuple
    frame = Base.invokelatest(recorded_expression("daf -> " * expression), daf)
    columns = [String(column) for column in names(frame)]
    return (pylist(columns), pylist([stored_form(frame[!, column]) for column in columns]))
end

function frame_error_text(daf::DafReader, expression::AbstractString)::Union{String, Nothing}
    return error_text(() -> Base.invokelatest(recorded_expression("daf -> " * expression), daf))
end

function doctest_value_form(code::AbstractString)::Tuple
    sandbox = Module()
    Core.eval(sandbox, :(using DataAxesFormats))
    value = include_string(sandbox, code)
    if value === nothing
        return ("nothing",)
    elseif value isa AbstractString
        return ("string", String(value))
    elseif value isa Real
        return ("scalar", scalar_form(value)...)
    elseif value isa AbstractSet
        return ("names", sorted_names(value))
    elseif value isa AbstractDict
        return ("pairs", pylist([(String(key), Int(index)) for (key, index) in value]))
    elseif value isa NamedArrays.NamedArray
        return ("result", result_form(value))
    elseif value isa AbstractVector{<:AbstractString}
        return ("strings", pylist([String(entry) for entry in value]))
    end
    return error("unexpected doctest value: $(typeof(value))")
end
"""

_helpers_loaded: list[Any] = []


def julia_bridge() -> Any:
    """The bridge module, with the kit's ``manifest.jl`` and the test-only helpers loaded (once)."""
    bridge = start_julia()
    if not _helpers_loaded:
        import juliacall

        juliacall.Base.include(bridge, str(KIT / "manifest.jl"))
        bridge.seval(f"begin\n{JULIA_TEST_HELPERS}\nend")
        _helpers_loaded.append(bridge)
    return bridge


def julia_manifest(julia_daf: Any) -> dict:
    return json.loads(str(julia_bridge().manifest_text(julia_daf)))


def _julia_error_matches(message: str, record: dict) -> bool:
    if record["expect_error_match"] == "regex":  # Julia's @test_throws Regex(...)
        return re.search(record["expect_error"], message) is not None
    try:
        assert_error_message(message, record["expect_error"])
    except AssertionError:
        return False
    return True


def _frame_from_julia(form: tuple) -> pd.DataFrame:
    names, columns = form
    return pd.DataFrame({str(name): stored_value(tuple(column), f"the column: {name}")[0]
                         for name, column in zip(names, columns, strict=True)})


def _check_inline_case(record: dict) -> None:
    bridge = julia_bridge()
    kind = record["kind"]
    if kind == "canonical_string":
        julia_text = str(bridge.canonical_query_text(record["query"]))
        assert julia_text == record["expected"] == str(eval_builder(record["query"])), julia_text
        return
    if kind == "parse_error":
        message = bridge.parse_error_text(record["query"])
        assert message is not None and _julia_error_matches(str(message), record), message
        with pytest.raises(pydaf.DafError):
            pydaf.queries.parse_query(record["query"])
        return
    daf = apply_setup_ops(record["setup_ops"], new_daf=lambda name: pydaf.MemoryDaf(name=name))["daf"]
    julia_daf = to_julia(daf)
    expression = record["query_is_builder_expression"]
    if kind == "query":
        checks = record["checks"]
        if expression:
            theirs = query_result_value(bridge.builder_query_form(julia_daf, record["query"]))
        else:
            theirs = julia_query(julia_daf, record["query"])
        query = eval_builder(record["query"], daf) if expression else record["query"]
        assert_same_result(daf.get_query(query, cache=checks["cache"]), theirs)
        assert_inline_result(theirs, record["expected"], checks["query_result_dimensions"])
    elif kind == "query_error":
        with pytest.raises(DafJuliaError) as julia_error:
            julia_query(julia_daf, record["query"])
        assert _julia_error_matches(str(julia_error.value), record), str(julia_error.value)
        with pytest.raises(pydaf.DafError):
            daf[eval_builder(record["query"], daf) if expression else record["query"]]
    elif kind == "frame":
        theirs = _frame_from_julia(bridge.frame_form(julia_daf, record["query"]))
        ours = eval_builder(record["query"], daf)
        assert list(ours.columns) == list(theirs.columns) == record["expected"]["columns"]
        for column in theirs.columns:
            assert ours[column].dtype == theirs[column].dtype, column
            _assert_close(ours[column].to_numpy(), theirs[column].to_numpy(), column)
    elif kind == "frame_error":
        message = bridge.frame_error_text(julia_daf, record["query"])
        assert message is not None and _julia_error_matches(str(message), record), message
        with pytest.raises(pydaf.DafError):
            eval_builder(record["query"], daf)
    else:
        raise AssertionError(f"unknown record kind: {kind}")


def _run_all(records: list[dict], check) -> None:
    """Check every record, then fail once listing every record that failed (one test function, many cases)."""
    assert records, "no parity records (../shared/fixtures/parity is missing)"
    failures = []
    for record in records:
        try:
            check(record)
        except (AssertionError, pydaf.DafError) as error:
            failures.append(f"{record['id']} ({record['kind']}): {error}")
    assert not failures, f"{len(failures)} of {len(records)} records differ:\n" + "\n\n".join(failures)


@needs_julia
def test_inline_parity_cases_agree_with_julia():
    _run_all(load_cases("inline_query_cases.json"), _check_inline_case)


def _doctest_value(form: tuple) -> Any:
    kind = form[0]
    if kind == "nothing":
        return None
    if kind == "string":
        return str(form[1])
    if kind == "scalar":
        return query_result_value(form)
    if kind == "names":
        return sorted(str(name) for name in form[1])
    if kind == "pairs":
        return {str(key): int(index) - 1 for key, index in sorted(form[1], key=lambda pair: int(pair[1]))}
    if kind == "strings":
        return [str(entry) for entry in form[1]]
    return query_result_value(tuple(form[1]))


def _check_doctest_case(record: dict) -> None:
    query_call = doctest_query_call(record["call"])
    if query_call is not None and not record["setup_ops"]:
        daf = cached_example(record["daf"])
        theirs = julia_query(daf, query_call[1])
        assert_same_result(daf[query_call[1]], theirs)
        assert_doctest_result(theirs, record["kind"], record["expected"])
        return
    bindings = "".join(f"{name} = example_{record['daf']}_daf()\n" for name in ("cells", "metacells", "chain")
                       if record["setup"] is None and re.search(rf"\b{name}\b", record["call"]))
    form = julia_bridge().doctest_value_form(f"{bindings}{record['setup'] or ''}\n{record['call']}")
    theirs = _doctest_value(tuple(form))
    if query_call is not None:
        assert_doctest_result(theirs, record["kind"], record["expected"])
        return
    assert_api_result(theirs, record["kind"], record["expected"])
    variables = apply_setup_ops(record["setup_ops"]) if record["setup_ops"] else None
    ours = run_api_call(record["call"], variables or _LazyExamples(record["daf"]), fresh_example)
    if isinstance(ours, pd.Series):
        assert_same_result(ours, theirs)
    elif record["kind"] == "names":
        assert sorted(ours) == theirs
    elif record["kind"] != "description":  # (descriptions name the data sets, which differ between the two)
        assert ours == theirs or (isinstance(theirs, list) and list(ours) == theirs), f"{ours!r} != Julia's {theirs!r}"


class _LazyExamples(dict):
    def __init__(self, which: str) -> None:
        super().__init__()
        self.which = which

    def __missing__(self, name: str) -> pydaf.DafWriter:
        self[name] = fresh_example(self.which)  # (reader calls may depend on version counters: a fresh one)
        return self[name]


@needs_julia
def test_doctest_parity_cases_agree_with_julia():
    _run_all(load_cases("doctest_cases.json"), _check_doctest_case)


@needs_julia
@pytest.mark.parametrize("which", ["cells", "metacells"])
def test_example_data_sets_are_julias(which):
    """pydaf's example data sets (built from the shared CSV files) are Julia's ``example_*_daf()``, property by
    property."""
    theirs = json.loads(str(julia_bridge().seval(f"manifest_text(example_{which}_daf())")))
    assert manifest_differences(theirs, daf_manifest(cached_example(which)), storage=True) == []


# With Julia: handing over, both ways, zero-copy.


def _same_julia_object(left: Any, right: Any) -> bool:
    return bool(julia_bridge().seval("(left, right) -> left === right")(left, right))


@needs_julia
def test_every_backend_is_handed_over_both_ways(tmp_path):
    for backend in manifest_backends():
        daf = fill_sample(backend.new(tmp_path, f"{backend.name}!"))
        reader = backend.reopen(daf, "r")
        ours = daf_manifest(reader)
        for in_memory in (False, True) if backend.persistent else (False,):
            julia_daf = to_julia(reader, in_memory=in_memory)
            assert manifest_differences(ours, julia_manifest(julia_daf), storage=True) == [], (backend, in_memory)
            back = from_julia(julia_daf)
            assert manifest_differences(ours, daf_manifest(back), storage=True) == [], (backend, in_memory)
            assert _same_julia_object(to_julia(back), julia_daf)
            if not in_memory and backend.persistent:
                assert back.complete_path() == reader.complete_path()


def _addresses(daf: pydaf.DafReader, axes: tuple[str, ...], name: str) -> list[int]:
    return [_address(part) for part in _stored_parts(daf, axes, name)]


def _julia_addresses(julia_daf: Any, axes: tuple[str, ...], name: str) -> list[int]:
    """The addresses of what Julia's ``get_vector``/``get_matrix`` (this layout) hold."""
    bridge = julia_bridge()
    if len(axes) == 1:
        value = bridge.get_vector(julia_daf, axes[0], name)
    else:
        value = bridge.get_matrix(julia_daf, *axes, name, relayout=False)
    return [int(address) for address in bridge.data_addresses(value)]


@needs_julia
def test_zero_copy_both_ways(tmp_path):
    bridge = julia_bridge()
    daf = pydaf.MemoryDaf(name="zero!").add_axis("cell", list("ABCD")).add_axis("gene", list("XYZ"))
    daf.set_vector("cell", "dense", np.arange(4, dtype=np.float32))
    daf.set_vector("cell", "sparse", SparseVector(4, np.array([2], np.uint32), np.array([7], np.int16)))
    daf.set_matrix("cell", "gene", "dense", np.asfortranarray(np.arange(12.0).reshape(4, 3)), relayout=False)
    daf.set_matrix("cell", "gene", "sparse", sp.csc_matrix(np.eye(4, 3, dtype=np.uint8)), relayout=False)
    julia_daf = to_julia(daf)
    back = from_julia(julia_daf)
    for axes, name in ((("cell",), "dense"), (("cell",), "sparse"), (("cell", "gene"), "dense"),
                       (("cell", "gene"), "sparse")):
        assert _julia_addresses(julia_daf, axes, name) == _addresses(daf, axes, name) == \
            _addresses(back, axes, name), (axes, name)

    julia_made = bridge.seval("""let daf = MemoryDaf(; name = "julia!")
        add_axis!(daf, "cell", ["A", "B", "C"])
        set_vector!(daf, "cell", "x", Float64[1, 2, 3])
        set_matrix!(daf, "cell", "cell", "m", sprand(3, 3, 0.5))
        daf
    end""")
    from_julia_daf = from_julia(julia_made)
    assert _julia_addresses(julia_made, ("cell",), "x") == _addresses(from_julia_daf, ("cell",), "x")
    assert _julia_addresses(julia_made, ("cell", "cell"), "m") == _addresses(from_julia_daf, ("cell", "cell"), "m")

    path = tmp_path / "mapped.h5df"
    pydaf.H5df(path, "w").add_axis("cell", list("ABCD")).set_vector("cell", "x", np.arange(4.0))
    mapped = from_julia(to_julia(pydaf.H5df(path, "r")))  # Julia maps the file; pydaf views Julia's map
    assert _julia_addresses(to_julia(mapped), ("cell",), "x") == _addresses(mapped, ("cell",), "x")


@needs_julia
def test_julias_errors_are_daf_errors():
    daf = pydaf.MemoryDaf(name="errors!").add_axis("cell", ["A"])
    with pytest.raises(DafJuliaError, match="missing vector: age\nfor the axis: cell") as error:
        julia_query(daf, "@ cell : age")
    assert isinstance(error.value, pydaf.DafError)
    assert from_julia(to_julia(daf)).get_vector("cell", "age", default=None) is None


if REASON is None:
    class JuliaMemoryBackend(DafBackend):
        """A Julia ``MemoryDaf``, read and written by pydaf through :func:`from_julia`."""

        name = "julia_memory"

        def new(self, directory: Path, name: str) -> pydaf.DafWriter:
            return from_julia(start_julia().new_memory_daf(name))

    class TestJuliaMemoryDaf(DafConformance):
        backend = JuliaMemoryBackend()
else:
    def test_conformance_of_a_julia_daf():
        pytest.skip(f"Julia is not available: {_brief(REASON)}")


# With the julia executable: julia/verify.jl on data pydaf wrote.


def _verify(*arguments: str) -> subprocess.CompletedProcess:
    assert JULIA is not None
    return subprocess.run([JULIA.executable, f"--project={KIT}", str(KIT / "verify.jl"), *arguments],
                          capture_output=True, text=True, timeout=600)


@needs_julia_kit
def test_verify_accepts_what_pydaf_wrote_and_shows_what_differs(tmp_path):
    for backend in manifest_backends():
        if not backend.persistent:
            continue
        # Read-only before Julia opens it (HDF5's lock keeps other programs out of a file open for writing).
        reader = backend.reopen(fill_sample(backend.new(tmp_path, "verified!")), "r")
        path = reader.complete_path()
        if path is None:  # (a persistent backend with no single path, such as a chain)
            continue
        manifest = tmp_path / f"{backend.name}.manifest.json"
        assert pydaf.cli.main(["manifest", path, "--output", str(manifest)]) == 0
        format_name = STORED_FORMATS[reader.format.type_name]
        accepted = _verify("--format", format_name, path, str(manifest))
        assert accepted.returncode == 0 and f"OK: {path} matches" in accepted.stdout, accepted.stderr
        changed = json.loads(manifest.read_text(encoding="utf-8"))
        changed["vectors"]["cell"]["label"]["hash"] = "0" * 64
        del changed["matrices"]["gene"]["cell"]["UMIs"]
        manifest.write_text(json.dumps(changed), encoding="utf-8")
        rejected = _verify("--format", format_name, path, str(manifest))
        assert rejected.returncode == 1, rejected.stderr
        lines = rejected.stderr.splitlines()
        start = next(index for index, line in enumerate(lines) if line.startswith("MISMATCH: "))
        assert lines[start + 1:start + 3] == ["  vectors/cell/label: hash differs",
                                              "  matrices/gene/cell/UMIs: unexpected"]


# The data sets julia/make_fixtures.jl wrote.


def _kit() -> dict:
    return json.loads((KIT_OUTPUT / "kit.json").read_text(encoding="utf-8"))


def _kit_data_set(format_name: str) -> pydaf.DafReader:
    entries = [entry for entry in _kit()["data_sets"] if entry["format"] == format_name]
    assert len(entries) == 1, f"kit.json lists no {format_name} data set"
    if format_name not in {entry.name for entry in registered_formats()}:
        pytest.skip(f"pydaf has no {format_name} format registered yet")
    path = str(KIT_OUTPUT / entries[0]["path"])
    assert guess_format(path).name == format_name
    return pydaf.open_daf(path, "r")


@needs_kit_output
@pytest.mark.parametrize("format_name", ["H5df", "FilesDaf", "ZarrDaf"])
def test_kit_data_sets_read_as_julia_wrote_them(format_name):
    daf = _kit_data_set(format_name)
    entry = next(entry for entry in _kit()["data_sets"] if entry["format"] == format_name)
    theirs = json.loads((KIT_OUTPUT / entry["manifest"]).read_text(encoding="utf-8"))
    assert manifest_differences(theirs, daf_manifest(daf), storage=True) == []
    first = json.loads((KIT_OUTPUT / _kit()["data_sets"][0]["manifest"]).read_text(encoding="utf-8"))
    assert manifest_differences(first, theirs) == []  # the three formats hold the same data


def _recorded_values(values: list, eltype: str) -> np.ndarray:
    dtype = julia_dtype(eltype)
    if dtype.kind == "f":
        return np.array([float(value) for value in values], dtype=dtype)
    if dtype.kind == "O":
        array = np.empty(len(values), dtype=object)
        array[:] = values
        return array
    return np.array(values, dtype=dtype)


def assert_recorded_result(ours: Any, recorded: dict, what: str) -> None:
    """pydaf's result equals what ``make_fixtures.jl`` recorded Julia's to be."""
    kind = recorded["kind"]
    if kind == "names":
        assert ours == set(recorded["names"]), what
    elif kind == "scalar":
        expected = _recorded_values([recorded["value"]], recorded["eltype"])
        if recorded["eltype"] == "String":
            assert isinstance(ours, str) and ours == expected[0], what
        else:
            assert np.asarray(ours).dtype == expected.dtype, f"{what}: {ours!r} is not {recorded['eltype']}"
            _assert_close(np.asarray([ours]), expected, what)
    elif kind == "vector":
        assert isinstance(ours, pd.Series), what
        assert list(ours.index) == recorded["names"] and ours.index.name == recorded["dim_name"], what
        expected = _recorded_values(recorded["values"], recorded["eltype"])
        assert _values_dtype(ours) == expected.dtype, f"{what}: {_values_dtype(ours)} != {recorded['eltype']}"
        _assert_close(ours.to_numpy(), expected, what)
    else:
        assert isinstance(ours, pd.DataFrame), what
        assert list(ours.index) == recorded["rows"] and list(ours.columns) == recorded["cols"], what
        assert (ours.index.name, ours.columns.name) == (recorded["row_dim_name"], recorded["col_dim_name"]), what
        assert _values_dtype(ours) == julia_dtype(recorded["eltype"]), what
        rows = [_recorded_values(row, recorded["eltype"]) for row in recorded["values"]]
        expected = np.array(rows).reshape(len(recorded["rows"]), len(recorded["cols"]))
        _assert_close(dense_frame(ours).to_numpy(), expected, what)


_DAF_NAME_LINE = re.compile(r"^\s*(?:in|for|of) the daf data: .*$")


@needs_kit_output
@pytest.mark.parametrize("format_name", ["H5df", "FilesDaf", "ZarrDaf"])
def test_kit_queries_give_julias_results(format_name):
    daf = _kit_data_set(format_name)
    records = json.loads((KIT_OUTPUT / _kit()["queries"]).read_text(encoding="utf-8"))["records"]
    failures = []
    for record in records:
        query = record["query"]
        try:
            if "error" in record:
                with pytest.raises(pydaf.DafError) as error:
                    daf[query]
                # The data sets are named differently on each side: compare the rest of Julia's message.
                expected = "\n".join(line for line in record["error"].splitlines() if not _DAF_NAME_LINE.match(line))
                assert_error_message(str(error.value), expected)
            else:
                assert_recorded_result(daf[query], record["result"], query)
        except (AssertionError, pydaf.DafError, pytest.fail.Exception) as error:
            failures.append(f"{query}: {error}")
    assert not failures, "\n".join(failures)


def test_recorded_results_are_read_exactly():
    """The reading of ``make_fixtures.jl``'s result records itself (floats as Julia's text, exact)."""
    floats = _recorded_values(["0.1", "1.0e-5", "NaN", "-Inf"], "Float32")
    assert floats.dtype == np.float32 and floats[0] == np.float32(0.1) and math.isnan(floats[2])
    assert _recorded_values([True, False], "Bool").tolist() == [True, False]
    series = pd.Series(np.array([1.5, 2.0], np.float32), index=pd.Index(["a", "b"], name="cell", dtype=object))
    assert_recorded_result(series, {"kind": "vector", "eltype": "Float32", "dim_name": "cell", "names": ["a", "b"],
                                    "values": ["1.5", "2.0"]}, "v")
    with pytest.raises(AssertionError):
        assert_recorded_result(series, {"kind": "vector", "eltype": "Float64", "dim_name": "cell",
                                        "names": ["a", "b"], "values": ["1.5", "2.0"]}, "v")
