"""pydaf.dask's arrays (``vector``, ``matrix``) and writes (``store_vector``, ``store_matrix``) on a real
``distributed.LocalCluster`` of worker processes: values equal pydaf's own reads exactly in every stored format,
nothing large travels in the graph, mapped chunks are views of the file on the workers, a worker below the data's
size computes a reduction without ever holding the matrix, a killed worker's chunk is recomputed, and writes are
validated before anything is computed."""

from __future__ import annotations

import itertools
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

dask = pytest.importorskip("dask", reason="pydaf.dask needs the dask extra: pip install 'pydaf[dask]'")
distributed = pytest.importorskip("distributed", reason="the tests run a distributed.LocalCluster")

import dask.array as da  # noqa: E402
import scipy.sparse as sp  # noqa: E402

import pydaf  # noqa: E402
import pydaf.dask as pdd  # noqa: E402
from pydaf._os.maps import mapped_region  # noqa: E402
from pydaf.sparse import SparseMatrixCSC, SparseVector  # noqa: E402

from .http_servers import plain_server  # noqa: E402
from .worker_memory import peak_rss, reset_peak  # noqa: E402

N_CELLS, N_GENES = 300, 200
FORMATS = ["h5df", "files", "zarr", "files-packed", "h5df-packed"]
MATRICES = ["X", "U", "T", "S"]  # dense, sparse (stored as cell,gene); dense, sparse (stored as gene,cell only)


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0") \
            as cluster, distributed.Client(cluster) as client:
        yield client


def _content() -> pydaf.MemoryDaf:
    rng = np.random.default_rng(29)
    daf = pydaf.MemoryDaf(name="content!")
    daf.add_axis("cell", [f"c{index}" for index in range(N_CELLS)]).add_axis("gene", [f"g{index}"
                                                                                     for index in range(N_GENES)])
    daf.set_vector("cell", "age", rng.integers(-50, 50, N_CELLS).astype(np.int32))
    daf.set_vector("cell", "type", np.array(["T", "B", "NK"] * (N_CELLS // 3), dtype=object))
    positions = np.sort(rng.choice(N_CELLS, 40, replace=False))
    daf.set_vector("cell", "marker", SparseVector(N_CELLS, positions + 1, rng.random(40)))
    daf.set_matrix("cell", "gene", "X", rng.random((N_CELLS, N_GENES)).astype(np.float32), relayout=False)
    umis = sp.random(N_CELLS, N_GENES, density=0.1, format="csc", random_state=3, dtype=np.float64)
    umis.data = np.ceil(umis.data * 100)
    daf.set_matrix("cell", "gene", "U", umis.astype(np.uint16), relayout=False)
    daf.set_matrix("gene", "cell", "T", rng.random((N_GENES, N_CELLS)), relayout=False)
    daf.set_matrix("gene", "cell", "S", sp.random(N_GENES, N_CELLS, density=0.05, format="csc", random_state=4,
                                                  dtype=np.float64), relayout=False)
    return daf


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> dict[str, str]:
    """The same content in each format (only the layouts listed above are stored)."""
    folder = tmp_path_factory.mktemp("dask_sources")
    content = _content()
    paths = {"h5df": folder / "cells.h5df", "files": folder / "cells.daf", "zarr": folder / "cells.daf.zarr",
             "files-packed": folder / "packed.daf", "h5df-packed": folder / "packed.h5df"}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DAF_PACKED_TARGET_CHUNK_KB", "1")  # (so that columns of 200 entries are packed)
        for kind, path in paths.items():
            with pydaf.open_daf(path, "w", packed=kind.endswith("packed")) as daf:
                pydaf.copy_all(daf, content, relayout=False, progress=False)
    for kind, path in paths.items():  # (the packed variants are packed: their columns are decoded, not mapped)
        with pydaf.open_daf(path) as daf:
            for layout, name in ((("cell", "gene"), "X"), (("gene", "cell"), "T")):
                columns = daf.get_stored_matrix_columns(*layout, name, slice(0, 1))
                assert (mapped_region(columns) is None) == kind.endswith("packed")
    return {kind: str(path) for kind, path in paths.items()}


def _same_matrix(actual, expected) -> None:
    if sp.issparse(expected):
        assert sp.issparse(actual), type(actual)
        actual, expected = sp.csc_matrix(actual), sp.csc_matrix(expected)
        assert actual.shape == expected.shape and actual.dtype == expected.dtype
        actual.sort_indices(), expected.sort_indices()
        assert np.array_equal(actual.indptr, expected.indptr) and np.array_equal(actual.indices, expected.indices)
        assert np.array_equal(actual.data, expected.data)
    else:
        assert isinstance(actual, np.ndarray) and actual.dtype == expected.dtype
        assert np.array_equal(actual, expected)


# Values.


@pytest.mark.parametrize("kind", FORMATS)
@pytest.mark.parametrize("name", MATRICES)
@pytest.mark.parametrize("layout", [("cell", "gene"), ("gene", "cell")])
def test_matrix_values_equal_pydaf_reads(client, stored, kind, name, layout):
    rows_axis, columns_axis = layout
    array = pdd.matrix(stored[kind], rows_axis, columns_axis, name, chunk_bytes=8192)
    expected = pydaf.open_daf(stored[kind]).get_matrix(rows_axis, columns_axis, name)
    assert array.shape == expected.shape and array.dtype == expected.dtype
    flipped = not pydaf.open_daf(stored[kind]).has_matrix(rows_axis, columns_axis, name, relayout=False)
    assert max(array.numblocks) > 1 and array.numblocks[1 if flipped else 0] == 1  # (cut along stored columns)
    blocks = client.gather(client.compute(array.to_delayed().ravel().tolist()))
    if sp.issparse(expected):
        assert isinstance(array._meta, sp.csc_matrix)
        assert all(type(block) is sp.csc_matrix for block in blocks)  # (never densified, on the workers)
    else:
        assert all(isinstance(block, np.ndarray) for block in blocks)
    _same_matrix(array.compute(), expected)


@pytest.mark.parametrize("kind", FORMATS)
@pytest.mark.parametrize("name", ["age", "type", "marker", "name", "index"])
def test_vector_values_equal_pydaf_reads(client, stored, kind, name):
    array = pdd.vector(stored[kind], "cell", name, chunk_entries=70)
    expected = pydaf.open_daf(stored[kind]).get_vector("cell", name)
    assert array.chunks == ((70, 70, 70, 70, 20),) and array.dtype == expected.dtype
    values = array.compute()
    assert values.dtype == expected.dtype and np.array_equal(values, expected)


def test_an_open_data_set_is_a_source_as_its_path(client, stored):
    with pydaf.open_daf(stored["h5df"]) as daf:
        array = pdd.matrix(daf, "cell", "gene", "X", chunk_bytes=60_000)
        assert np.array_equal(array.compute(), daf.get_matrix("cell", "gene", "X"))


def test_sparse_chunks_follow_the_stored_entries(stored):
    """Sparse chunks are cut where the entries (not the columns) add up to ``chunk_bytes``."""
    daf = pydaf.open_daf(stored["h5df"])
    array = pdd.matrix(daf, "cell", "gene", "U", chunk_bytes=20_000)
    nnz = np.diff(daf.get_matrix("cell", "gene", "U").indptr)
    starts = np.concatenate([[0], np.cumsum(array.chunks[1])])
    sizes = [int(nnz[start:stop].sum()) * 10 + 8 * (stop - start) for start, stop in itertools.pairwise(starts)]
    assert all(size <= 20_000 for size in sizes) and sum(sizes[:-1]) / (len(sizes) - 1) > 15_000


def test_reading_over_http(client, stored):
    folder, name = os.path.split(stored["files"])
    with plain_server(folder) as url:
        array = pdd.matrix(f"{url}/{name}", "cell", "gene", "U", chunk_bytes=8192)
        _same_matrix(array.compute(), pydaf.open_daf(stored["files"]).get_matrix("cell", "gene", "U"))
        ages = pdd.vector(f"{url}/{name}", "cell", "age", chunk_entries=100)
        assert np.array_equal(ages.compute(), pydaf.open_daf(stored["files"]).get_vector("cell", "age"))


# What travels, and what the workers hold.


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> str:
    """A 16 MB dense matrix (and a sparse one) in an H5df."""
    path = str(tmp_path_factory.mktemp("dask_big") / "big.h5df")
    rng = np.random.default_rng(1)
    with pydaf.open_daf(path, "w") as daf:
        daf.add_axis("cell", [f"c{index}" for index in range(2000)]).add_axis("gene", [f"g{index}"
                                                                                      for index in range(1000)])
        daf.set_matrix("cell", "gene", "X", rng.random((2000, 1000)), relayout=False)
        daf.set_matrix("cell", "gene", "U", sp.random(2000, 1000, density=0.2, format="csc", random_state=2),
                       relayout=False)
    return path


@pytest.mark.parametrize("name", ["X", "U"])
def test_nothing_large_in_the_graph(big, name):
    array = pdd.matrix(big, "cell", "gene", name, chunk_bytes=1 << 20)
    graph = dict(array.__dask_graph__())
    pickled = len(pickle.dumps(graph))
    assert len(graph) == array.npartitions > 5
    assert pickled < 400 * len(graph) < array.nbytes / 100, pickled  # (a source and positions per task)
    cloudpickle = pytest.importorskip("cloudpickle")
    assert len(cloudpickle.dumps(graph)) < 400 * len(graph)


def _mapped_file(address: int) -> str | None:
    """The file that the mapping holding ``address`` in this process maps (from ``/proc/self/maps``), or None."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            start, stop = (int(part, 16) for part in fields[0].split("-"))
            if start <= address < stop:
                return fields[5].strip() if len(fields) == 6 else None
    return None


def _zero_copy_report(chunk: np.ndarray, client_pid: int) -> np.ndarray:
    """Run on a worker (fused with the chunk's read): 1 if the chunk is read-only and lies in a shared map of a
    file this process mapped (pydaf's registry and the kernel's ``/proc/self/maps`` both say so), else 0."""
    address = chunk.__array_interface__["data"][0]
    path = _mapped_file(address)
    ok = (not chunk.flags.writeable and mapped_region(chunk) is not None and path is not None
          and os.path.exists(path.removesuffix(" (deleted)")) and os.getpid() != client_pid)
    return np.array([[int(ok)]])


@pytest.mark.parametrize("kind", ["h5df", "files"])
@pytest.mark.parametrize("layout", [("cell", "gene"), ("gene", "cell")])
def test_dense_chunks_are_views_of_the_file_on_the_workers(client, stored, kind, layout):
    array = pdd.matrix(stored[kind], *layout, "X", chunk_bytes=8192)
    reports = array.map_blocks(_zero_copy_report, os.getpid(), chunks=(1, 1), meta=np.empty((0, 0), np.int64))
    reports = reports.compute()
    assert reports.size == array.npartitions > 1 and reports.min() == 1


@pytest.fixture
def large(tmp_path) -> str:
    """A 400 MB dense Float64 matrix in an H5df (deleted after the test)."""
    path = str(tmp_path / "large.h5df")
    with pydaf.open_daf(path, "w") as daf:
        daf.add_axis("cell", [f"c{index}" for index in range(5000)]).add_axis("gene", [f"g{index}"
                                                                                      for index in range(10_000)])
        with daf.empty_dense_matrix("cell", "gene", "X", "Float64") as values:
            for start in range(0, 10_000, 1000):
                values[:, start:start + 1000] = np.random.default_rng(start).random((5000, 1000))
    yield path
    os.unlink(path)


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="reads Linux's peak RSS (VmHWM)")
def test_workers_below_the_matrix_size_reduce_it_without_holding_it(large):
    """Workers limited to 60% of the matrix each (dask's nanny kills a worker whose RSS passes 95% of its limit, and
    pauses it at 80%) sum it by columns. Checked: the sum is right; no worker was killed or restarted (same process
    ids before and after); and each worker's peak RSS during the sum (``VmHWM``, reset just before; it counts the
    mapped file pages a process touched) stays within its baseline plus the few chunks in flight (up to ~5 under
    load), far below the matrix: without releasing the pages of dropped chunks, a worker's RSS keeps every page it
    read (two workers: about half the matrix each, 200 MB), past its limit."""
    size = os.path.getsize(large)
    assert size > 400e6
    chunk_bytes = 16 << 20
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0",
                                  memory_limit=int(0.6 * size)) as cluster, distributed.Client(cluster) as client:
        pids = client.run(os.getpid)
        baselines = client.run(reset_peak)
        array = pdd.matrix(large, "cell", "gene", "X", chunk_bytes=chunk_bytes)
        assert array.npartitions >= 20
        totals = client.compute(array.sum(axis=0)).result(timeout=120)  # (a paused or killed worker: fails)
        peaks = client.run(peak_rss)
        assert client.run(os.getpid) == pids  # (no worker died)
    with pydaf.open_daf(large) as daf:
        assert np.array_equal(totals, daf.get_matrix("cell", "gene", "X").sum(axis=0))
    for worker, peak in peaks.items():
        grown = peak - baselines[worker]
        print(f"worker {worker}: baseline {baselines[worker] / 1e6:.0f} MB, peak {peak / 1e6:.0f} MB "
              f"(+{grown / 1e6:.0f} MB) for a {size / 1e6:.0f} MB matrix in {chunk_bytes >> 20} MB chunks")
        assert grown < 5 * chunk_bytes < size / 4  # (without releasing: about half the matrix, 200 MB)
        assert peak < 0.6 * size


def _die_once(chunk: np.ndarray, marker: str) -> np.ndarray:
    """Kill this worker process the first time any chunk gets here (the marker file says it happened)."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return np.asarray(chunk).sum(axis=0, keepdims=True)
    os._exit(17)


def test_a_killed_worker_is_retried(client, stored, tmp_path):
    marker = str(tmp_path / "died")
    array = pdd.matrix(stored["h5df"], "cell", "gene", "X", chunk_bytes=8192)
    pids = set(client.run(os.getpid).values())
    meta = np.empty((0, 0), np.float32)
    totals = array.map_blocks(_die_once, marker, chunks=(1, array.chunks[1]), meta=meta).compute()
    assert os.path.exists(marker)
    assert set(client.run(os.getpid).values()) != pids  # (a worker was replaced)
    expected = pydaf.open_daf(stored["h5df"]).get_matrix("cell", "gene", "X").sum(axis=0, keepdims=True)
    assert np.array_equal(totals, expected)


# Writing back.


def _destination(tmp_path, kind: str) -> pydaf.DafWriter:
    path = tmp_path / ("out.h5df" if kind == "h5df" else "out.daf")
    daf = pydaf.open_daf(path, "w")
    return daf.add_axis("cell", [f"c{index}" for index in range(N_CELLS)]).add_axis(
        "gene", [f"g{index}" for index in range(N_GENES)])


@pytest.mark.parametrize("kind", ["h5df", "files"])
def test_store_round_trips(client, stored, tmp_path, kind):
    source = pydaf.open_daf(stored["h5df"])
    with _destination(tmp_path, kind) as out:
        dense = pdd.matrix(stored["h5df"], "cell", "gene", "X", chunk_bytes=8192)
        pdd.store_matrix(out, "cell", "gene", "X2", dense * 2, progress=False)
        sparse = pdd.matrix(stored["h5df"], "gene", "cell", "U", chunk_bytes=8192)  # (only cell,gene stored)
        pdd.store_matrix(out, "gene", "cell", "U", sparse, relayout=False, progress=False)
        pdd.store_vector(out, "cell", "age", pdd.vector(stored["h5df"], "cell", "age", chunk_entries=64),
                         progress=False)
        pdd.store_vector(out, "cell", "type", pdd.vector(stored["h5df"], "cell", "type", chunk_entries=64),
                         progress=False)
        strings = da.from_array(np.array([["a", "bc"]] * N_CELLS, dtype=object)[:, [0, 1] * (N_GENES // 2)],
                                chunks=(100, 50))
        pdd.store_matrix(out, "cell", "gene", "letters", strings, progress=False)
    with pydaf.open_daf(out.complete_path()) as back:
        _same_matrix(back.get_matrix("cell", "gene", "X2"), source.get_matrix("cell", "gene", "X") * 2)
        assert back.has_matrix("gene", "cell", "X2", relayout=False)  # (relayout by default)
        _same_matrix(back.get_matrix("gene", "cell", "X2", relayout=False),
                     np.asfortranarray(source.get_matrix("cell", "gene", "X").T * 2))
        assert isinstance(back.get_stored_matrix("gene", "cell", "U"), SparseMatrixCSC)
        assert not back.has_matrix("cell", "gene", "U", relayout=False)
        _same_matrix(back.get_matrix("gene", "cell", "U"), source.get_matrix("gene", "cell", "U"))
        for name in ("age", "type"):
            expected = source.get_vector("cell", name)
            assert np.array_equal(back.get_vector("cell", name), expected)
            assert back.get_vector("cell", name).dtype == expected.dtype
        assert back.get_matrix("cell", "gene", "letters")[7, :4].tolist() == ["a", "bc", "a", "bc"]


@pytest.mark.parametrize("kind", ["h5df", "files", "zarr"])
def test_results_go_back_into_the_data_set_they_are_computed_from(client, stored, tmp_path, kind):
    # The workers read the data set while results are written into it: an H5df (whose writer locks the file against
    # every other process) by its path, opened for writing once they are computed; the others by an open writer.
    path = str(tmp_path / os.path.basename(stored[kind]))
    with pydaf.open_daf(path, "w") as copy, pydaf.open_daf(stored[kind]) as original:
        pydaf.copy_all(copy, original, relayout=False, progress=False)
        expected = np.asarray(original.get_matrix("cell", "gene", "X"), np.float64).sum(axis=1)
    totals = pdd.matrix(path, "cell", "gene", "X", chunk_bytes=8192).sum(axis=1, dtype=np.float64)
    doubled = pdd.matrix(path, "cell", "gene", "X", chunk_bytes=8192) * 2
    assert pdd.get_np_query(path, "@ cell @ gene :: X >| Max").shape == (N_CELLS,)  # (the workers have it open)
    if kind == "h5df":
        assert pdd.store_vector(path, "cell", "total", totals, progress=False) is None
        pdd.store_matrix(path, "cell", "gene", "X2", doubled, relayout=False, progress=False)
    else:
        with pydaf.open_daf(path, "r+") as daf:
            assert pdd.store_vector(daf, "cell", "total", totals, progress=False) is daf
            pdd.store_matrix(daf, "cell", "gene", "X2", doubled, relayout=False, progress=False)
    with pydaf.open_daf(path) as back:
        assert np.array_equal(back.get_matrix("cell", "gene", "X2"), back.get_matrix("cell", "gene", "X") * 2)
        assert np.allclose(back.get_vector("cell", "total"), expected, rtol=1e-12)
    with pytest.raises(pydaf.DafExistsError):  # (checked against the data set before anything is computed)
        pdd.store_vector(path, "cell", "total", totals, progress=False)
    if kind == "h5df":
        pdd.forget_sources(path)  # (this process's tasks kept it open read-only)
        with pydaf.open_daf(path, "r+") as daf, pytest.raises(pydaf.DafValueError, match="open for writing"):
            pdd.matrix(daf, "cell", "gene", "X")


def _touch(block: np.ndarray, marker: str) -> np.ndarray:
    with open(marker, "a"):
        pass
    return block


@pytest.mark.parametrize("kind", ["h5df", "files"])
def test_store_refuses_before_computing(client, stored, tmp_path, kind):
    marker = str(tmp_path / "computed")
    dense = pdd.matrix(stored["h5df"], "cell", "gene", "X", chunk_bytes=8192).map_blocks(
        _touch, marker, meta=np.empty((0, 0), np.float32))
    ages = pdd.vector(stored["h5df"], "cell", "age").map_blocks(_touch, marker, meta=np.empty(0, np.int32))
    with _destination(tmp_path, kind) as out:
        out.set_matrix("gene", "cell", "X", np.zeros((N_GENES, N_CELLS), np.float32), relayout=False)
        out.set_vector("cell", "age", np.ones(N_CELLS, np.int32))
        with pytest.raises(pydaf.DafExistsError, match="existing matrix: X\nfor the rows axis: gene"):
            pdd.store_matrix(out, "cell", "gene", "X", dense, progress=False)  # (the other layout exists)
        with pytest.raises(pydaf.DafExistsError, match="existing vector: age"):
            pdd.store_vector(out, "cell", "age", ages, progress=False)
        with pytest.raises(pydaf.DafShapeError, match="the length: 300\nof the rows of the matrix: Y"):
            pdd.store_matrix(out, "gene", "cell", "Y", dense, progress=False)
        with pytest.raises(pydaf.DafShapeError, match="of the vector: short"):
            pdd.store_vector(out, "cell", "short", ages[:10], progress=False)
        with pytest.raises(pydaf.DafMissingError, match="missing axis: donor"):
            pdd.store_vector(out, "donor", "age", ages, progress=False)
        with pytest.raises(pydaf.DafNameError, match="reserved vector: name"):
            pdd.store_vector(out, "cell", "name", ages, progress=False)
        with pytest.raises(pydaf.DafTypeError):
            pdd.store_vector(out, "cell", "half", ages.astype(np.float16), progress=False)
        assert not os.path.exists(marker)  # (nothing was computed)
        assert not out.has_matrix("gene", "cell", "Y") and not out.has_vector("cell", "short")
        assert np.array_equal(out.get_vector("cell", "age"), np.ones(N_CELLS, np.int32))
        assert np.array_equal(out.get_matrix("gene", "cell", "X"), np.zeros((N_GENES, N_CELLS), np.float32))
        pdd.store_vector(out, "cell", "age", ages, overwrite=True, progress=False)
        assert os.path.exists(marker)
        assert np.array_equal(out.get_vector("cell", "age"), pydaf.open_daf(stored["h5df"]).get_vector("cell", "age"))
    with pytest.raises(pydaf.DafReadOnlyError):
        pdd.store_vector(pydaf.open_daf(out.complete_path()), "cell", "other", ages, progress=False)


def _fail_on_last(block: np.ndarray, block_info=None) -> np.ndarray:
    if block_info[0]["chunk-location"][1] == block_info[0]["num-chunks"][1] - 1:
        raise RuntimeError("this chunk fails")
    return block


@pytest.mark.parametrize("kind", ["h5df", "files"])
def test_a_failing_chunk_leaves_no_partial_matrix(client, stored, tmp_path, kind):
    failing = pdd.matrix(stored["h5df"], "cell", "gene", "X", chunk_bytes=8192).map_blocks(
        _fail_on_last, meta=np.empty((0, 0), np.float32))
    with _destination(tmp_path, kind) as out:
        with pytest.raises(RuntimeError, match="this chunk fails"):
            pdd.store_matrix(out, "cell", "gene", "X", failing, progress=False)
        assert not out.has_matrix("cell", "gene", "X")
        with pytest.raises(RuntimeError, match="this chunk fails"):
            pdd.store_matrix(out, "cell", "gene", "U",
                             pdd.matrix(stored["h5df"], "cell", "gene", "U", chunk_bytes=8192).map_blocks(
                                 _fail_on_last, meta=sp.csc_matrix((0, 0), dtype=np.uint16)), progress=False)
        assert not out.has_matrix("cell", "gene", "U")


# Errors, and imports.


def test_a_memory_data_set_is_refused():
    with pytest.raises(pydaf.DafValueError, match="lives in this process only"):
        pdd.vector(_content(), "cell", "age")
    with pytest.raises(pydaf.DafValueError, match="lives in this process only"):
        pdd.matrix(_content(), "cell", "gene", "X")


def test_missing_data_is_pydafs_error_when_built(stored):
    path = stored["h5df"]
    with pytest.raises(pydaf.DafMissingError, match="missing vector: height"):
        pdd.vector(path, "cell", "height")
    with pytest.raises(pydaf.DafMissingError, match="missing axis: donor"):
        pdd.vector(path, "donor", "age")
    with pytest.raises(pydaf.DafMissingError, match="missing matrix: Z\nfor the rows axis: cell"):
        pdd.matrix(path, "cell", "gene", "Z")
    with pytest.raises(pydaf.DafMissingError, match="missing matrix: T\nfor the rows axis: cell") as error:
        pdd.matrix(path, "cell", "gene", "T", relayout=False)  # (stored only as gene,cell)
    assert "other way around" not in str(error.value)
    with pytest.raises(pydaf.DafMissingError, match="missing axis: donor"):
        pdd.matrix(path, "cell", "donor", "X")
    with pytest.raises(pydaf.DafValueError, match="invalid chunk_bytes: 0"):
        pdd.matrix(path, "cell", "gene", "X", chunk_bytes=0)


def test_importing_pydaf_does_not_import_dask():
    subprocess.run([sys.executable, "-c", "import pydaf, sys; assert 'dask' not in sys.modules, 'dask imported'"],
                   check=True)


def test_pydaf_dask_without_dask_says_how_to_install():
    result = subprocess.run([sys.executable, "-c", "import sys; sys.modules['dask'] = None; import pydaf.dask"],
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert "ImportError" in result.stderr and 'pip install "pydaf[dask]"' in result.stderr
