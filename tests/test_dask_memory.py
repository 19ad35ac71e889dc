"""pydaf.dask queries on a real ``distributed.LocalCluster`` of worker processes whose memory limit is below the
data set's size (and below its dense matrix's): every query form gives the local result, and no worker ever holds
the whole matrix, checked from the workers' own memory reports (peak RSS, ``VmHWM``, reset before each query) and
from the cluster (no worker killed by its nanny or restarted: same process ids, same number of workers).

A query that pydaf.dask runs as one task (a user-defined reduction of the whole matrix, ``X >> Extent``, which it
cannot combine from pieces) needs the whole matrix on one worker: a separate test records what happens under the
limit.

Sizes: a worker that has run pydaf's engine (numba's compiled kernels loaded) holds about 180 MB before it reads any
data, so the limit (60% of the data set) leaves room for a few pieces only when the data set is large (~700 MB)."""

from __future__ import annotations

import concurrent.futures
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

dask = pytest.importorskip("dask", reason="pydaf.dask needs the dask extra: pip install 'pydaf[dask]'")
distributed = pytest.importorskip("distributed", reason="the tests run a distributed.LocalCluster")

import scipy.sparse as sp  # noqa: E402
from dask.utils import key_split  # noqa: E402

import pydaf  # noqa: E402
import pydaf.dask as pdd  # noqa: E402
from pydaf.dask import queries as dask_queries  # noqa: E402

from . import dask_user_reduction  # noqa: E402  (Extent, ExtentOfPieces)
from .worker_memory import peak_rss, reset_peak  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"),
                                reason="reads and resets Linux's peak RSS (VmHWM, /proc/self/clear_refs)")

N_CELLS, N_GENES = 20_000, 6_000  # a 960 MB dense Float64 matrix (a worker running the engine holds ~310 MB)
LIMIT_FRACTION = 0.6  # of the data set's size, per worker
DENSE_CHUNK = 16 << 20  # bytes of stored data a piece reads
SPARSE_CHUNK = 1 << 20  # (the sparse matrix is ~30 MB: pieces of it are smaller)
VECTOR_CHUNK = 16_000  # (8 bytes a cell: 10 pieces)
SQUARE_CHUNK = 8 << 20  # (the square matrix of genes: 18 pieces)
TIMEOUT = 60  # seconds a query may take (a paused worker never finishes: fail instead of hanging)
# (A mode of continuous values passes every value's key through the client, a batch a round: 16 passes over X.)
SLOW = {"@ cell @ gene :: X >> Mode": 400}


# The data set.


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> str:
    """An H5df: ``cell`` x ``gene``, a dense Float64 matrix ``X`` and a sparse UInt16 matrix ``U`` (3%), both stored
    as (cell, gene) only; cell vectors ``type``, ``age``, ``selected``; gene vectors ``is_marker``, ``module``.
    Deleted at the end."""
    path = str(tmp_path_factory.mktemp("dask_memory") / "large.h5df")
    rng = np.random.default_rng(29)
    with pydaf.open_daf(path, "w") as daf:
        daf.add_axis("cell", [f"c{index}" for index in range(N_CELLS)])
        daf.add_axis("gene", [f"g{index}" for index in range(N_GENES)])
        daf.set_vector("cell", "type", np.array(["T", "B", "NK", "Mono"], dtype=object)[rng.integers(0, 4, N_CELLS)])
        daf.set_vector("cell", "age", rng.integers(18, 90, N_CELLS).astype(np.int32))
        daf.set_vector("cell", "selected", rng.random(N_CELLS) < 0.3)
        daf.set_vector("gene", "is_marker", rng.random(N_GENES) < 0.1)
        daf.add_axis("metacell", [f"MC{index}" for index in range(40)])
        daf.set_vector("metacell", "kind", np.array([f"K{index % 6}" for index in range(40)], dtype=object))
        metacells = np.array([""] + [f"MC{index}" for index in range(40)], dtype=object)
        daf.set_vector("cell", "metacell", metacells[rng.integers(0, 41, N_CELLS)])  # (1/41 in none)
        daf.set_vector("gene", "module", np.array([f"M{index}" for index in range(7)],
                                                  dtype=object)[rng.integers(0, 7, N_GENES)])
        with daf.empty_dense_matrix("cell", "gene", "X", "Float64") as values:  # (written in slabs)
            for start in range(0, N_GENES, 500):
                values[:, start:start + 500] = rng.normal(size=(N_CELLS, 500))
        umis = sp.random(N_CELLS, N_GENES, density=0.03, format="csc", random_state=5,
                         data_rvs=lambda size: rng.integers(1, 60, size=size)).astype(np.uint16)
        daf.set_matrix("cell", "gene", "U", umis, relayout=False)
        with daf.empty_dense_matrix("gene", "gene", "G", "Float32") as values:  # (a square matrix: 144 MB)
            for start in range(0, N_GENES, 1000):
                values[:, start:start + 1000] = rng.normal(size=(N_GENES, 1000)).astype(np.float32)
    assert os.path.getsize(path) >= 300e6
    yield path
    os.unlink(path)


# Each worker's memory, as the kernel reports it.


@dataclass
class Cluster:
    """The cluster under test (started afresh after a query that killed or paused a worker) and what it reported."""

    path: str
    size: int  # of the data set's file
    matrix_bytes: int  # of the dense matrix
    limit: int  # each worker's memory limit
    cluster: Any = None
    client: Any = None
    pids: dict[str, int] = field(default_factory=dict)
    baselines: dict[str, int] = field(default_factory=dict)  # each worker's RSS, pydaf's engine loaded
    peaks: dict[str, dict[str, int]] = field(default_factory=dict)  # query -> worker -> peak RSS

    def start(self) -> None:
        self.cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                                dashboard_address=":0", memory_limit=self.limit,
                                                preload=[dask_user_reduction.__file__])  # (ExtentOfPieces)
        self.client = distributed.Client(self.cluster)
        workers = _workers(self.client)
        assert len(workers) == 2 and all(worker["memory_limit"] == self.limit for worker in workers.values())
        _warm(self.client, self.path)
        self.pids = _pids(self.client)
        self.baselines = self.client.run(reset_peak)

    def stop(self) -> None:
        self.client.close(timeout=10)
        self.cluster.close(timeout=10)


def _workers(client) -> dict[str, dict]:
    return client.scheduler_info(n_workers=-1)["workers"]


def _warm(client, path: str) -> None:
    """Load pydaf's engine and kernels on both workers (a baseline is a worker ready to evaluate a query)."""
    assert pdd.get_np_query(path, "@ cell : age >> Sum", chunk_bytes=VECTOR_CHUNK) \
        == pydaf.open_daf(path).get_np_query("@ cell : age >> Sum")
    assert pdd.get_np_query(path, "@ cell [ selected ] @ gene [ is_marker ] :: U >- Sum", chunk_bytes=SPARSE_CHUNK) \
        .shape == (int(pydaf.open_daf(path).get_np_query("@ gene [ is_marker ]").shape[0]),)


@pytest.fixture(scope="module")
def cluster(dataset):
    size = os.path.getsize(dataset)
    state = Cluster(dataset, size, N_CELLS * N_GENES * 8, int(LIMIT_FRACTION * size))
    assert state.limit < size and state.limit < state.matrix_bytes
    with dask_user_reduction.registered():
        state.start()
        try:
            yield state
        finally:
            state.stop()
            _report(state)


def _report(state: Cluster) -> None:
    print(f"\ndata set {state.size / 1e6:.0f} MB, dense matrix {state.matrix_bytes / 1e6:.0f} MB, "
          f"limit {state.limit / 1e6:.0f} MB a worker; baselines "
          + ", ".join(f"{value / 1e6:.0f} MB" for value in state.baselines.values()))
    for query, peaks in state.peaks.items():
        print(f"  {query:60s} " + ("a worker restarted or paused" if "failed" in peaks
                                    else "  ".join(f"{value / 1e6:5.0f} MB" for value in peaks.values())))


def _pids(client) -> dict[str, int]:
    """Each worker's process id, as the (in-process) scheduler knows it (a restarted worker is a new process)."""
    return {address: worker.pid for address, worker in list(client.cluster.scheduler.workers.items())}


def _run(state: Cluster, query: str, chunk_bytes: int) -> tuple[Any, dict[str, int]]:
    """The query evaluated on the cluster, and each worker's peak RSS meanwhile (reset just before). Fails as soon
    as a worker is restarted (its nanny kills it past 95% of its limit) or after ``TIMEOUT`` (a worker paused at 80%
    never resumes): the cluster is then restarted so that the next query starts afresh."""
    client = state.client
    client.run(reset_peak)
    pool = concurrent.futures.ThreadPoolExecutor(1)
    future = pool.submit(pdd.get_np_query, state.path, query, chunk_bytes=chunk_bytes)
    deadline, failure = time.monotonic() + SLOW.get(query, TIMEOUT), None
    try:
        while failure is None:
            try:
                result = future.result(timeout=0.25)
                break
            except concurrent.futures.TimeoutError:
                pids = _pids(client)
                if sorted(pids.values()) != sorted(state.pids.values()):
                    failure = f"a worker was restarted (pids {sorted(state.pids.values())} -> {sorted(pids.values())})"
                elif time.monotonic() > deadline:
                    memory = {address: worker["metrics"]["memory"] for address, worker in _workers(client).items()}
                    failure = f"not done in {SLOW.get(query, TIMEOUT)} s (paused workers?): worker memory {memory}"
    finally:
        pool.shutdown(wait=False)
    if failure is not None:
        state.peaks[query] = {"failed": 0}
        state.stop()  # (the query's thread then fails)
        state.start()
        pytest.fail(f"{query}: {failure}")
    peaks = client.run(peak_rss)
    state.peaks[query] = peaks
    return result, peaks


# The table: (query, chunk_bytes, how pydaf.dask evaluates it, the comparison with the local result).
# how: "split <axis>" (pieces concatenated: bitwise), "reduce <axis>" (a scalar from partials), "select <axis>" (a
# median or quantile selected by rounds over the pieces: exact), "mode <axis>" (a mode counted by rounds over the
# pieces: exact), "group <axis>" (per group partials), "rows <axis>" / "grouped <axis>" (per row, or per group of
# columns, partials of column pieces), "one -" (one task: only for vectors).
# compare: "exact" (bitwise) or "rtol" (float partials: within 1e-12 of the largest magnitude, as documented).
QUERIES = [
    # The dense matrix: lookups with element-wise steps and masks on rows and columns.
    ("@ cell [ selected ] @ gene [ is_marker ] :: X % Abs", DENSE_CHUNK, "split gene", "exact"),
    ("@ cell [ type = B ] @ gene [ ! is_marker ] :: X > 1", DENSE_CHUNK, "split gene", "exact"),
    # One value per column, per row, per group of rows or columns.
    ("@ cell @ gene :: X >- Sum", DENSE_CHUNK, "split gene", "exact"),
    ("@ cell @ gene :: X >- Mean", DENSE_CHUNK, "split gene", "exact"),
    ("@ cell @ gene :: X >- Max", DENSE_CHUNK, "split gene", "exact"),
    ("@ cell @ gene :: X >- Var", DENSE_CHUNK, "split gene", "exact"),
    ("@ cell @ gene :: X >| Sum", DENSE_CHUNK, "rows gene", "rtol"),
    ("@ cell @ gene :: X >| Mean", DENSE_CHUNK, "rows gene", "rtol"),
    ("@ cell @ gene :: X >| Min", DENSE_CHUNK, "rows gene", "exact"),
    ("@ cell @ gene :: X -/ type >- Mean", DENSE_CHUNK, "split gene", "exact"),
    ("@ cell @ gene :: X |/ module >| Sum", DENSE_CHUNK, "grouped gene", "rtol"),
    # Scalars of the whole matrix (partials combined).
    ("@ cell @ gene :: X >> Sum", DENSE_CHUNK, "reduce gene", "rtol"),
    ("@ cell @ gene :: X >> Mean", DENSE_CHUNK, "reduce gene", "rtol"),
    ("@ cell [ selected ] @ gene :: X >> Max", DENSE_CHUNK, "reduce gene", "exact"),
    ("@ cell @ gene :: X >> GeoMean eps 10", DENSE_CHUNK, "reduce gene", "rtol"),
    # Order statistics of the whole matrix: selected by rounds over its pieces (exact).
    ("@ cell @ gene :: X >> Median", DENSE_CHUNK, "select gene", "exact"),
    ("@ cell [ selected ] @ gene :: X >> Quantile p 0.9", DENSE_CHUNK, "select gene", "exact"),
    # The mode of the whole matrix: counted by rounds over its pieces, in batches of distinct values (exact; the
    # values are continuous: each occurs once, and the first one is the mode).
    ("@ cell @ gene :: X >> Mode", DENSE_CHUNK, "mode gene", "exact"),
    # Vectors.
    ("@ cell [ selected ] : age", VECTOR_CHUNK, "split cell", "exact"),
    ("@ cell [ type = B & age > 40 ] : age % Abs", VECTOR_CHUNK, "split cell", "exact"),
    ("@ cell [ selected ] : age >> Sum", VECTOR_CHUNK, "reduce cell", "exact"),
    ("@ cell : age / type >> Mean", VECTOR_CHUNK, "group cell", "exact"),
    ("@ cell @ gene :: X >| Sum / type >> Mean", DENSE_CHUNK, "group cell", "rtol"),  # (rows gathered by blocks)
    ("@ cell @ gene :: X >| Sum / type >> Median", DENSE_CHUNK, "group cell", "rtol"),  # (each piece's values)
    ("@ cell : age / type >> Quantile p 0.3", VECTOR_CHUNK, "group cell", "exact"),
    # The sparse matrix.
    ("@ cell @ gene :: U", SPARSE_CHUNK, "split gene", "exact"),
    ("@ cell [ selected ] @ gene [ is_marker ] :: U % Log base 2 eps 1", SPARSE_CHUNK, "split gene", "exact"),
    ("@ cell @ gene :: U >- Sum", SPARSE_CHUNK, "split gene", "exact"),
    ("@ cell @ gene :: U >- Var", SPARSE_CHUNK, "split gene", "exact"),
    ("@ cell @ gene :: U >| Sum", SPARSE_CHUNK, "rows gene", "exact"),
    ("@ cell @ gene :: U >| Mean", SPARSE_CHUNK, "rows gene", "exact"),
    ("@ cell @ gene :: U >| Min", SPARSE_CHUNK, "rows gene", "exact"),
    ("@ cell @ gene :: U -/ type >- Max", SPARSE_CHUNK, "split gene", "exact"),
    ("@ cell @ gene :: U >> Sum", SPARSE_CHUNK, "reduce gene", "exact"),
    ("@ cell @ gene :: U >> Mean", SPARSE_CHUNK, "reduce gene", "exact"),
    ("@ cell @ gene :: U >> Median", SPARSE_CHUNK, "select gene", "exact"),  # (97% implicit zeros)
    ("@ cell @ gene :: U >> Mode", SPARSE_CHUNK, "mode gene", "exact"),  # (the implicit zeros, never made)
    ("@ cell [ selected ] : age >> Mode", VECTOR_CHUNK, "mode cell", "exact"),
    ("@ cell @ gene :: X >| Sum / type >> Mode", DENSE_CHUNK, "group cell", "exact"),  # (each piece's values)
    ("@ cell : type / type >> Count", VECTOR_CHUNK, "group cell", "exact"),
    ("@ cell @ gene :: U >| Sum / type >> Mean", SPARSE_CHUNK, "group cell", "exact"),
    # Steps after a combined reduction, on its result.
    ("@ cell @ gene :: X >| Sum / type >> Mean % Abs", DENSE_CHUNK, "group cell", "rtol"),
    ("@ cell @ gene :: X >> Median % Abs % Log eps 1", DENSE_CHUNK, "select gene", "exact"),
    ("@ cell @ gene :: U >| Max >= 40", SPARSE_CHUNK, "rows gene", "exact"),
    # Masks that look up the other axis: evaluated by the client once.
    ("@ cell [ X @ gene = g5 > 0 ] @ gene :: X >- Max", DENSE_CHUNK, "split gene", "exact"),
    ("@ cell [ U @ gene = g7 > 0 | selected ] @ gene :: U >> Sum", SPARSE_CHUNK, "reduce gene", "exact"),
    ("@ cell @ gene [ X @ cell = c3 > 1 ] :: X >| Min", DENSE_CHUNK, "rows gene", "exact"),
    # Group keys that drop entries (``??``: a cell in no metacell is in no group).
    ("@ cell @ gene :: X >| Sum / metacell ?? : kind >> Mean", DENSE_CHUNK, "group cell", "rtol"),
    ("@ cell @ gene :: U >| Sum / metacell ?? : kind >> Max", SPARSE_CHUNK, "group cell", "exact"),
    # The mode of strings: each piece's distinct strings, their counts and last positions.
    ("@ cell : type >> Mode", VECTOR_CHUNK, "reduce cell", "exact"),
    # A user-defined reduction that says how to combine pieces (its partials: each piece's largest and smallest).
    ("@ cell @ gene :: X >> ExtentOfPieces", DENSE_CHUNK, "reduce gene", "exact"),
    ("@ cell [ selected ] @ gene :: U >> ExtentOfPieces", SPARSE_CHUNK, "reduce gene", "exact"),
    # A square matrix: its columns queried as an alias axis, split alone.
    ("@ gene @ gene :: G >| Sum", SQUARE_CHUNK, "rows alias", "rtol"),
    ("@ gene @ gene :: G >- Max", SQUARE_CHUNK, "split alias", "exact"),
    ("@ gene [ is_marker ] @ gene :: G >> Median", SQUARE_CHUNK, "select alias", "exact"),
    # Forms of vectors run as one task: it holds vectors, not a matrix.
    ("@ cell : type * metacell", VECTOR_CHUNK, "one -", "exact"),  # (a count matrix)
    ("@ cell : metacell ?? : kind", VECTOR_CHUNK, "one -", "exact"),  # (a chain that drops entries)
]


def _values(entry: Any) -> tuple:
    return entry.values if hasattr(entry, "values") else entry  # (a pytest.param, or a plain row)


def _same(result: Any, local: Any, compare: str) -> None:
    if sp.issparse(local):
        assert sp.issparse(result) and result.format == "csc"
        assert result.shape == local.shape and result.dtype == local.dtype
        assert (result != local).nnz == 0
        return
    result, local = np.asarray(result), np.asarray(local)
    assert result.dtype == local.dtype and result.shape == local.shape
    if compare == "exact":
        assert np.array_equal(result, local)
        if local.ndim == 2:
            assert result.flags.f_contiguous
    else:
        # (partial sums of signed values: the rounding is relative to the magnitudes summed, so a sum near zero
        # differs by more than 1e-12 of itself; bounded by 1e-12 of the largest result)
        scale = float(np.abs(local).max()) if local.size else 0.0
        assert np.allclose(result, local, rtol=1e-12, atol=1e-12 * scale), (result, local)


@pytest.mark.parametrize(("query", "chunk_bytes", "how", "compare"), QUERIES,
                         ids=[_values(entry)[0] for entry in QUERIES])
def test_query_under_the_memory_limit(cluster, dataset, query, chunk_bytes, how, compare):
    state = cluster
    plan = dask_queries._graph(dataset, query, chunk_bytes)
    kind, axis = how.split()
    axis = dask_queries._ALIAS if axis == "alias" else axis  # (the columns of a square matrix)
    assert (plan.plan.kind, plan.plan.axis or "-") == (kind, axis), plan.plan.reason
    pieces = len(plan.pieces) if kind == "split" else len(plan.ranges) if kind in ("select", "mode") \
        else sum(not key_split(key).startswith(("combine", "DerivedSource")) for key in plan.pieces[0].dask)
    assert pieces >= 4 or kind == "one", pieces
    local = pydaf.open_daf(dataset).get_np_query(query, cache=False)
    result, peaks = _run(state, query, chunk_bytes)
    _same(result, local, compare)
    # No worker was killed or restarted (the nanny restarts a worker past 95% of its limit: a new process).
    assert _pids(state.client) == state.pids and state.client.run(os.getpid) == state.pids
    assert len(_workers(state.client)) == 2
    for worker, peak in peaks.items():
        assert peak < state.limit, (worker, peak, state.limit)
        assert peak < state.matrix_bytes, (worker, peak, state.matrix_bytes)
        if ":: G " in query:  # (nor the whole square matrix: 144 MB)
            assert peak - state.baselines[worker] < N_GENES * N_GENES * 4, (worker, peak, state.baselines)


def test_the_table_covers_the_forms():
    kinds = [_values(entry)[2].split()[0] for entry in QUERIES]
    assert len(QUERIES) >= 25 and kinds.count("split") >= 12 and kinds.count("reduce") >= 5
    assert kinds.count("group") >= 3 and kinds.count("rows") >= 3 and kinds.count("select") >= 3
    assert kinds.count("mode") >= 3


# A form run as one task: the whole matrix on one worker.


def test_a_one_task_reduction_of_the_whole_matrix_under_the_limit(dataset):
    """A user-defined reduction of the whole matrix (``X >> Extent``) is not combined from pieces (nothing says how):
    one task evaluates the whole query on one worker, which reads the whole matrix (its mapped pages count in its
    RSS), past its limit.
    Measured: the worker's nanny kills it (95%), the scheduler retries the task on a fresh worker
    ``allowed-failures`` more times (3 by default), then the client gets ``KilledWorker`` naming the task; the
    cluster keeps its two workers (restarted), ready for the next query."""
    query = "@ cell @ gene :: X >> Extent"
    size = os.path.getsize(dataset)
    started = time.monotonic()
    with dask_user_reduction.registered(), \
            distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0",
                                     memory_limit=int(LIMIT_FRACTION * size),
                                     preload=[dask_user_reduction.__file__]) as local_cluster, \
            distributed.Client(local_cluster) as client:
        plan = dask_queries._graph(dataset, query, DENSE_CHUNK).plan
        assert plan.kind == "one" and "Extent is not combined from pieces" in plan.reason
        pids = _pids(client)
        with pytest.raises(distributed.scheduler.KilledWorker, match="_evaluate_whole"):
            pdd.get_np_query(dataset, query, chunk_bytes=DENSE_CHUNK)
        assert set(_pids(client).values()).isdisjoint(pids.values()) or _pids(client) != pids  # (restarted)
        client.wait_for_workers(2, timeout=30)
        # The cluster still answers a split query.
        assert pdd.get_np_query(dataset, "@ cell : age >> Sum", chunk_bytes=VECTOR_CHUNK) \
            == pydaf.open_daf(dataset).get_np_query("@ cell : age >> Sum")
    print(f"\n{query}: KilledWorker after {time.monotonic() - started:.0f} s")
