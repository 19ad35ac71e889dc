"""pydaf.dafpy beyond dafpy's own tests (tests/test_dafpy_suite.py runs those): ``None`` options, return forms, the
unwrapping of dafpy's wrappers into pydaf's data sets and import isolation (dafpy-style scripts compared with pydaf's
own API: tests/test_dafpy_script.py)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import pydaf
import pydaf.dafpy as dp
from pydaf.core.brief import brief
from pydaf.errors import DafJuliaUnavailableError

ROOT = Path(__file__).resolve().parent.parent


def _cells() -> dp.DafWriter:
    daf = dp.memory_daf(name="cells!").add_axis("cell", ["A", "B", "C"]).add_axis("gene", ["X", "Y"])
    daf.set_vector("cell", "age", np.array([30, 40, 50], np.uint8)).set_vector("cell", "donor", ["N1", "N2", "N1"])
    daf.set_matrix("cell", "gene", "UMIs", np.array([[1, 0, 2], [3, 4, 0]], np.uint16).T)
    return daf.set_scalar("organism", "human").set_scalar("depth", np.uint32(7))


# Import isolation.


def _modules_after(statement: str) -> set[str]:
    code = f"import sys\n{statement}\nprint('\\n'.join(sorted(sys.modules)))"
    output = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True,
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}).stdout
    return set(output.split())


def test_import_pydaf_does_not_import_the_dafpy_layer():
    assert not {module for module in _modules_after("import pydaf") if module.startswith("pydaf.dafpy")}


def test_import_pydaf_dafpy_imports_no_julia():
    modules = _modules_after("import pydaf.dafpy")
    assert "pydaf.dafpy" in modules and "pydaf.dafpy.anndata_facade" in modules
    assert {module for module in modules if module.split(".")[0] in ("juliacall", "juliapkg", "julia")
            or module.startswith("pydaf.julia.") or module == "pydaf.julia"} == set()


def test_no_pydaf_module_below_imports_the_dafpy_layer():
    importers = [str(path.relative_to(ROOT)) for path in sorted((ROOT / "pydaf").rglob("*.py"))
                 if "dafpy" not in path.relative_to(ROOT / "pydaf").parts[:1]
                 and ("from .dafpy" in path.read_text() or "pydaf.dafpy" in path.read_text().replace(
                     '"pydaf.dafpy"', ""))]
    assert importers == []


def test_jl_raises_naming_what_was_asked_for():
    from pydaf.dafpy.julia_import import jl, jl_version

    assert jl_version is None
    with pytest.raises(DafJuliaUnavailableError, match=r"jl\.DataAxesFormats\.MemoryDaf is not available"):
        jl.DataAxesFormats.MemoryDaf(name="x")


def test_from_dafpy_import_star_gives_every_name_of_dafpy():
    namespace: dict = {}
    exec("from pydaf.dafpy import *", namespace)
    expected = {"DafReader", "DafReadOnly", "DafWriter", "CacheGroup", "memory_daf", "files_daf", "h5df", "zarr_daf",
                "open_daf", "complete_daf", "http_daf", "chain_reader", "chain_writer", "files_to_zarr",
                "zarr_to_files", "viewer", "ALL_SCALARS", "ALL_AXES", "ALL_VECTORS", "ALL_MATRICES", "copy_all",
                "copy_scalar", "copy_axis", "copy_vector", "copy_matrix", "copy_tensor", "EmptyData", "concatenate",
                "MergeAction", "adapter", "reconstruct_axis", "example_cells_daf", "example_metacells_daf",
                "example_chain_daf", "h5ad_as_daf", "daf_as_h5ad", "DafAnnData", "Axis", "LookupVector", "parse_query",
                "query_result_dimensions", "Sum", "Log", "AbnormalHandler", "LogLevel", "setup_logger",
                "inefficient_action_handler", "jl", "Undef", "StorageScalar", "QuerySequence", "Quantile"}
    assert expected - set(namespace) == set()


# The wrapper and pydaf's data set.


def test_the_wrapper_holds_pydafs_data_set_and_writes_go_to_it():
    native = pydaf.MemoryDaf(name="native!")
    wrapper = dp.memory_daf(native)
    assert wrapper.daf is native and isinstance(wrapper, dp.DafWriter)
    wrapper.add_axis("cell", ["A"]).set_vector("cell", "age", [3])
    assert native.get_vector("cell", "age").tolist() == [3]
    assert dp.DafReader(wrapper).daf is native  # a wrapper of a wrapper is a wrapper of the same data set


def test_the_layer_unwraps_before_calling_pydaf():
    cells = _cells()
    chain = dp.chain_reader([cells, dp.memory_daf(name="more!")], name="chain!")
    view = dp.viewer(cells, axes={"obs": "@ cell"}, data={dp.ALL_VECTORS: "="})
    for wrapper in (chain, view, cells.read_only()):
        assert isinstance(wrapper, dp.DafReadOnly) and isinstance(wrapper.daf, pydaf.DafReader)
        assert not isinstance(wrapper.daf, dp.DafReader)
    assert isinstance(view.daf, pydaf.DafView)
    destination = dp.memory_daf(name="destination!")
    dp.copy_all(source=view, destination=destination)
    assert destination.daf.get_vector("obs", "age").tolist() == [30, 40, 50]


def test_a_read_only_file_is_a_dafreadonly_and_refuses_writes_with_pydafs_error(tmp_path):
    dp.h5df(str(tmp_path / "cells.h5df"), "w", name="cells!").set_scalar("version", 1)
    reader = dp.h5df(str(tmp_path / "cells.h5df"))
    assert isinstance(reader, dp.DafReadOnly) and not isinstance(reader, dp.DafWriter)
    assert not hasattr(reader, "set_scalar")
    with pytest.raises(TypeError, match="not a writable pydaf data set"):
        dp.DafWriter(reader.daf)


# None means the default.


def test_none_options_are_the_defaults():
    cells = _cells()
    assert cells.description(cache=None, deep=None, tensors=None) == cells.daf.description()
    assert cells.has_matrix("gene", "cell", "UMIs", relayout=None) == cells.daf.has_matrix("gene", "cell", "UMIs")
    assert cells.matrices_set("gene", "cell", relayout=None) == {"UMIs"}
    assert cells.get_np_vector("cell", "missing", default=None) is None
    assert cells.get_pd_matrix("cell", "gene", "missing", default=None) is None
    with pytest.raises(pydaf.DafExistsError, match="existing scalar: organism"):
        cells.set_scalar("organism", "mouse", overwrite=None)  # the default: no overwrite
    assert str(dp.Log(base=None, eps=None, type=None)) == str(pydaf.queries.Log())
    assert str(dp.Clamp(min=None, max=1)) == str(pydaf.queries.Clamp(max=1))
    assert str(dp.Significant(high=2, low=None)) == str(pydaf.queries.Significant(high=2))
    assert str(dp.Quantile(p=0.5, type=None)) == str(pydaf.queries.Quantile(p=0.5))
    assert isinstance(dp.Log(base=2), pydaf.queries.Log)
    assert cells.get_np_query("@ cell : age >> Sum", cache=None) == 120


# Return forms.


def test_scalars_are_python_values():
    cells = _cells()
    assert type(cells.get_scalar("depth")) is int and cells.get_scalar("depth") == 7
    assert type(cells.get_np_query("@ cell : age >> Mean")) is float
    assert type(cells["@ cell : age >> Max"]) is int and cells["@ cell : age >> Max"] == 50
    assert type(cells[". organism"]) is str


def test_vectors_are_numpy_zero_copy_and_strings_are_str_arrays():
    cells = _cells()
    age = cells.get_np_vector("cell", "age")
    assert age is cells.get_np_vector("cell", "age")  # as dafpy's: the same object while unchanged
    assert np.shares_memory(age, cells.daf.get_vector("cell", "age")) and not age.flags.writeable
    assert cells.get_np_vector("cell", "donor").dtype == np.dtype("<U2")
    assert cells.axis_np_vector("cell").dtype.kind == "U"
    assert cells.axis_np_indices("cell", ["C", "A"]).tolist() == [2, 0]
    assert cells.axis_np_indices("cell", ["C", ""], allow_empty=True).dtype == np.int32
    assert cells.axis_np_entries("cell", [1, -1], allow_empty=True).tolist() == ["B", ""]


def test_pandas_results_are_indexed_by_entries_without_axis_names():
    cells = _cells()
    series = cells.get_pd_vector("cell", "age")
    assert series.index.tolist() == ["A", "B", "C"] and series.index.name is None and series.name is None
    queried = cells["@ cell : age"]
    assert queried.index.name is None and queried.tolist() == [30, 40, 50]
    frame = cells["@ cell @ gene :: UMIs"]
    assert frame.index.name is None and frame.columns.name is None and frame.to_numpy().tolist() == [[1, 3], [0, 4],
                                                                                                       [2, 0]]


def test_get_pd_frame_has_a_plain_index_and_a_name_column():
    frame = _cells().get_pd_frame("cell")
    assert isinstance(frame.index, pd.RangeIndex) and frame.columns.tolist() == ["name", "age", "donor"]
    assert frame["name"].tolist() == ["A", "B", "C"]
    picked = _cells().get_pd_frame("@ cell [ age > 35 ]", {"age": ": age", "double": ": age % Convert type Int32"})
    assert picked.to_dict("list") == {"age": [40, 50], "double": [40, 50]}


def test_a_sparse_matrix_in_pandas_stays_sparse():
    cells = _cells()
    cells.set_matrix("cell", "gene", "sparse", sp.csc_matrix(np.array([[0, 1], [0, 0], [2, 0]], np.float32)))
    frame = cells.get_pd_matrix("cell", "gene", "sparse")
    assert all(isinstance(dtype, pd.SparseDtype) for dtype in frame.dtypes)
    assert frame.to_numpy().tolist() == [[0, 1], [0, 0], [2, 0]]
    assert isinstance(cells.get_np_matrix("cell", "gene", "sparse"), sp.csc_matrix)


def test_a_missing_matrix_default_is_returned_as_given():
    default = np.zeros((3, 2), order="F")
    assert _cells().get_np_matrix("cell", "gene", "missing", default=default) is default
    assert _cells().get_np_matrix("cell", "gene", "missing", default=1).tolist() == [[1, 1], [1, 1], [1, 1]]


# dafpy's argument conventions.


def test_an_n_by_1_or_1_by_n_array_is_a_vector():
    cells = _cells()
    cells.set_vector("cell", "column", np.array([[1], [2], [3]]))
    cells.set_vector("cell", "row", np.array([[4, 5, 6]]))
    cells.set_vector("cell", "sparse", sp.csr_matrix(np.array([[0.0, 2.5, 0.0]])))
    assert cells.get_np_vector("cell", "column").tolist() == [1, 2, 3]
    assert cells.get_np_vector("cell", "row").tolist() == [4, 5, 6]
    assert cells.get_np_vector("cell", "sparse").tolist() == [0.0, 2.5, 0.0]


def test_a_row_major_matrix_is_refused_with_julias_message():
    cells = _cells()
    with pytest.raises(pydaf.DafTypeError, match=r"type not in column-major layout: 3 x 2 x Int64 in Rows \(Dense\)"):
        cells.set_matrix("cell", "gene", "C", np.arange(6).reshape(3, 2))
    with pytest.raises(pydaf.DafTypeError, match=r"in Rows \(Transpose, Sparse"):
        cells.set_matrix("cell", "gene", "CSR", sp.csr_matrix(np.eye(3, 2)))
    cells.set_matrix("cell", "gene", "F", np.arange(6).reshape(2, 3).T)  # the transpose of a row-major one
    assert cells.get_np_matrix("cell", "gene", "F").tolist() == [[0, 3], [1, 4], [2, 5]]


def test_empty_builders_are_with_blocks():
    cells = _cells()
    with cells.empty_dense_matrix("gene", "cell", "dense", np.float32) as dense:
        dense[:, :] = 1.5
    with cells.empty_sparse_matrix("gene", "cell", "sparse", np.float32, 1, np.int32) as (colptr, rowval, nzval):
        colptr[:] = [1, 1, 2, 2]
        rowval[:] = [2]
        nzval[:] = [0.5]
    assert cells.get_np_matrix("gene", "cell", "dense").tolist() == [[1.5] * 3] * 2
    assert cells.get_np_matrix("gene", "cell", "sparse").toarray().tolist() == [[0, 0, 0], [0, 0.5, 0]]


# The rest of dafpy's API.


def test_http_daf_reads_a_served_data_set(tmp_path):
    import functools
    import http.server
    import threading

    daf = pydaf.FilesDaf(str(tmp_path / "x.daf"), "w").add_axis("cell", ["A", "B"])
    daf.set_vector("cell", "age", np.array([3, 5]))

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *arguments):
            pass

    handler = functools.partial(Quiet, directory=str(tmp_path / "x.daf"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        served = dp.http_daf(f"http://127.0.0.1:{server.server_address[1]}", name="served!")
        assert isinstance(served, dp.DafReadOnly) and served.name == "served!"
        assert served.get_np_vector("cell", "age").tolist() == [3, 5]
    finally:
        server.shutdown()


def test_setup_logger_logs_pydaf_messages_to_stdout_from_the_level(capsys):
    logger = logging.getLogger("pydaf")
    kept = (list(logger.handlers), logger.level, logger.propagate)
    try:
        dp.setup_logger(sys.stdout, level=dp.LogLevel.Warn, show_time=False)
        logger.info("not shown")
        logger.warning("shown")
        dp.setup_logger(sys.stdout, level=-1000, show_time=False)  # Julia's Debug
        logging.getLogger("pydaf.queries").debug("debug")
        assert capsys.readouterr().out == "W: shown\nD: debug\n"
        with pytest.raises(ValueError, match="not implemented: logging into anything other than stdout and stderr"):
            dp.setup_logger(open(__file__))
    finally:
        logger.handlers[:], logger.level, logger.propagate = kept


def test_inefficient_action_handler_returns_the_previous_one():
    previous = dp.inefficient_action_handler(dp.AbnormalHandler.IgnoreHandler)
    try:
        assert dp.inefficient_action_handler(dp.AbnormalHandler.ErrorHandler) == dp.AbnormalHandler.IgnoreHandler
    finally:
        dp.inefficient_action_handler(previous)


def test_h5ad_round_trip_through_the_layer(tmp_path):
    cells = _cells()
    dp.daf_as_h5ad(cells, obs_is="cell", var_is="gene", X_is="UMIs", h5ad=str(tmp_path / "cells.h5ad"))
    back = dp.h5ad_as_daf(str(tmp_path / "cells.h5ad"), obs_is="cell", var_is="gene", X_is="UMIs",
                          unsupported_handler=dp.AbnormalHandler.ErrorHandler)
    assert isinstance(back, dp.DafWriter)
    assert back.get_np_matrix("cell", "gene", "UMIs").tolist() == cells.get_np_matrix("cell", "gene", "UMIs").tolist()
    with pytest.raises(pydaf.DafExistsError):  # pydaf does not replace a file unless asked
        dp.daf_as_h5ad(cells, obs_is="cell", var_is="gene", X_is="UMIs", h5ad=str(tmp_path / "cells.h5ad"))


# pydaf defects found by dafpy's tests.


def test_brief_of_a_csr_matrix_is_its_zero_copy_julia_form():
    # dafpy's test_matrices_defaults: Julia sees a CSR matrix as the Transpose of a CSC matrix, in Rows, with the
    # CSR's own (Int32) indices; pydaf said "in Columns (Sparse ... [Int64])".
    matrix = sp.csr_matrix(np.array([[0.0, 1.5, 0.0], [2.5, 0.0, 3.5]]))
    assert brief(matrix) == "2 x 3 x Float64 in Rows (Transpose, Sparse 3 (50%) [Int32])"
    assert brief(matrix.tocsc()) == "2 x 3 x Float64 in Columns (Sparse 3 (50%) [Int32])"


def test_slices_and_transposes_of_dafpys_facade_stay_dafpys():
    adata = dp.example_cells_daf().as_anndata(obs_axis="cell", var_axis="gene", x_matrix="UMIs")
    for derived in (adata[:10, :], adata.T, adata.query_obs("donor = N89")):
        assert type(derived) is dp.DafAnnData and isinstance(derived.daf, dp.DafReadOnly | dp.DafWriter)
    assert adata[:10, :].daf.axis_length("cell") == 10
