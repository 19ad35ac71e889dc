"""Benchmark: one single-cell workflow on the same data, side by side, in pydaf and in its peers (issue 29).

The script writes once (reused when ``--data`` holds it at the same ``--scale``) a sparse count matrix of a realistic
single-cell shape: ``200,000 x --scale`` cells by 20,000 genes, ~1,300 genes detected per cell (genes drawn by a
Zipf-like popularity, counts geometric from 1), ``Float32`` counts with 32-bit indices (8 bytes per stored entry:
~2.05 GB at scale 1), a cell ``type`` (20 types of unequal sizes) and a ``batch`` (10 batches of 10% each). It is
stored as anndata writes it, CSR (cells are rows: each cell's genes contiguous), in five copies:

``data.h5ad``
    ``AnnData.write_h5ad`` (X uncompressed CSR, ``obs`` categoricals);
``data.h5df``, ``data.daf``, ``data.daf.zarr``
    ``pydaf convert`` of the ``.h5ad`` (H5df), then of the H5df (FilesDaf, ZarrDaf). The CSR ``X`` becomes the matrix
    ``UMIs`` of ``gene`` x ``cell`` in columns (CSC with a column per cell: the same bytes as the CSR), as Julia's Daf
    stores it; only that layout is stored (a second layout would double each copy), so the queries name the
    ``gene``, ``cell`` order (``@ cell @ gene`` would relayout the whole matrix first);
``data.zarr``
    ``AnnData.write_zarr`` (anndata's default codec, blosc lz4) with ``X`` rewritten by ``anndata.io.write_elem`` in
    chunks of 4 Mi entries (anndata's default is one chunk per array, which dask can't split).

Steps (each tool runs them in this order in one fresh child process; untimed before them: the imports, the dask
cluster's start, and the same five steps on a 200-cell copy of the data set in ``--data``/warmup, so that what a
process pays once, e.g. numba's dispatch or zarr's codecs, is not in the steps; its time is printed):

1. ``open``: the data set opened for the workflow;
2. ``totals``: the sum of each cell's UMIs (a vector per cell);
3. ``means``: the mean of each gene per cell type (a type x gene matrix);
4. ``select``: the matrix of the cells of one batch (10% of the cells), in memory (CSR, or CSC of gene x cell);
5. ``write``: the totals written into the data set as a new per-cell vector (and durable to the page cache: closed).

Tools (what each reads and how):

``pydaf-h5df``, ``pydaf-files``, ``pydaf-zarr``
    ``pydaf.open_daf(path, "r+")``, then ``get_np_query`` of ``@ gene @ cell :: UMIs >- Sum``, ``@ gene @ cell ::
    UMIs |/ type >| Mean`` and ``@ gene @ cell [ batch = B3 ] :: UMIs``, then ``set_vector`` and ``close``: the stored
    arrays are mapped (H5df's, FilesDaf's and ZarrDaf's uncompressed one-chunk arrays alike);
``anndata-mem``
    ``anndata.read_h5ad`` (X read whole into memory), ``X.sum(axis=1)``, a one-hot type x cell indicator times ``X``
    over the type sizes (what ``scanpy.get.aggregate`` does), ``X[mask]``; the write is
    ``anndata.io.write_elem(h5py.File(path, "r+"), "obs", obs)``: only ``obs`` rewritten, not the whole file;
``anndata-backed``
    ``anndata.read_h5ad(path, backed="r")``: the two reductions chunked over rows as a user does it
    (``adata.chunked_X(10_000)``, each chunk a CSR in memory), ``adata[mask].X`` (backed row selection); backed
    ``"r"`` can't write, so the write closes the file and writes ``obs`` as ``anndata-mem`` does;
``zarr-dask``
    ``zarr.open_group`` of ``data.zarr`` and ``dask.array.from_zarr`` of ``X/data`` and ``X/indices`` (dask chunks
    of 16 Mi entries, 128 MiB of data and indices, ~ pydaf.dask's target), ``X/indptr`` and the ``obs`` codes read
    whole; each step is a graph over the blocks (each block's cells from ``indptr``, then ``np.bincount``, or a mask),
    the partials summed (dask's tree sum) or concatenated; the write is ``dask.array.store`` of the totals into a
    new array of ``obs`` (with anndata's encoding attributes and column order);
``pydaf-dask``
    ``pydaf.dask.get_np_query`` of the same queries on ``data.daf`` opened ``r+`` by the client (each task opens and
    maps it in its worker), the write ``pydaf.dask.store_vector``. FilesDaf, not H5df: an H5df is locked against
    readers while a process has it open ``r+`` (and against writers while the workers keep it open), so the client
    can't write into the H5df its workers read.

Both dask tools run on ``distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1)`` (the 2 cores
of the machine), started before the timed steps. The tools run ``--repeats`` times, interleaved (every tool once per
repeat), each after a warm read of its files (the page cache holds the data for every tool).

The table gives per tool and step the best and median seconds, the time relative to the best pydaf local tool on that
step, the peak RSS at the end of the step (``VmHWM``, the process's high-water mark so far; ``ru_maxrss`` is recorded
too, but Linux carries it over ``exec`` from the parent's memory; RSS counts the mapped file pages a step touched, so
the anonymous part is given too) and the peak anonymous RSS during the step (``RssAnon`` of ``/proc/self/status``,
sampled every 5 ms and at each step's end); for the dask tools, the client's (which runs the scheduler) plus each
worker's (their sum: an upper bound of the peak of the sum; the nannies are not counted). Then a line per step
saying whether every tool's result equals a reference computed with scipy from the ``.h5ad`` (totals and the
selection exactly, the selection by a hash of its canonical CSR arrays; the means within float32 rounding, ``rtol``
1e-5), and the targets: pydaf local fastest or within 1.2x of the fastest peer on every step with the lowest peak
RSS (and anon RSS), and pydaf on dask faster than ``anndata-backed`` and ``zarr-dask`` on both reductions.

Examples::

    python benchmarks/bench_peers.py --keep          # 8.9 GB under /tmp/bench_peers (5 copies), built once (~2 min)
    python benchmarks/bench_peers.py --scale 0.002 --genes 2000 --data /tmp/bench_peers_small --repeats 1   # smoke run
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from child_runs import MB, warm
from recording import OUTPUT_HELP, REPOSITORY, recording_main

DEFAULT_DATA = "/tmp/bench_peers"
CELLS = 200_000
GENES = 20_000
GENES_PER_CELL = 1_450  # (draws with replacement per cell: ~1,300 distinct genes remain)
TYPES = 20
BATCHES = 10
SELECTED_BATCH = "B3"
BACKED_ROWS = 10_000  # (rows per chunk of the backed reductions: ~100 MB of CSR)
ZARR_CHUNK = 1 << 22  # (entries per stored zarr chunk)
DASK_CHUNK = 1 << 24  # (entries per dask block: 4 zarr chunks)
WARMUP = "warmup"
WARMUP_CELLS = 200
STEPS = ("open", "totals", "means", "select", "write")
TOOLS = ("pydaf-h5df", "pydaf-files", "pydaf-zarr", "anndata-mem", "anndata-backed", "zarr-dask", "pydaf-dask")
PYDAF_LOCAL = ("pydaf-h5df", "pydaf-files", "pydaf-zarr")
PEERS = ("anndata-mem", "anndata-backed", "zarr-dask")
FILES = {"h5ad": "data.h5ad", "h5df": "data.h5df", "files": "data.daf", "zarr-daf": "data.daf.zarr",
         "zarr": "data.zarr"}
#: The copy each tool reads.
READS = {"pydaf-h5df": "h5df", "pydaf-files": "files", "pydaf-zarr": "zarr-daf", "anndata-mem": "h5ad",
         "anndata-backed": "h5ad", "zarr-dask": "zarr", "pydaf-dask": "files"}
QUERIES = {"totals": "@ gene @ cell :: UMIs >- Sum", "means": "@ gene @ cell :: UMIs |/ type >| Mean",
           "select": f"@ gene @ cell [ batch = {SELECTED_BATCH} ] :: UMIs"}


def written_name(tool: str) -> str:
    """The per-cell vector (obs column) the tool's ``write`` step writes."""
    return "total_" + tool.replace("-", "_")


# The data set.


def generate(cells: int, genes: int, seed: int = 0) -> tuple[Any, np.ndarray, np.ndarray]:
    """The CSR counts (cells x genes, ``float32`` values, ``int32`` indices), each cell's type and batch."""
    import scipy.sparse as sp

    generator = np.random.default_rng(seed)
    popularity = 1.0 / (np.arange(genes) + 20.0) ** 0.8
    order = generator.permutation(genes)  # (popular genes spread over the axis, not the first ones)
    cdf = np.cumsum(popularity[order])
    cdf /= cdf[-1]
    indptr = np.zeros(cells + 1, dtype=np.int64)
    all_indices, all_data = [], []
    block = 10_000
    for start in range(0, cells, block):
        stop = min(start + block, cells)
        draws = np.clip(generator.lognormal(np.log(GENES_PER_CELL), 0.4, stop - start), 100, 6 * GENES_PER_CELL)
        draws = draws.astype(np.int64)
        rows = np.repeat(np.arange(stop - start, dtype=np.int64), draws)
        columns = np.searchsorted(cdf, generator.random(len(rows)), side="right").clip(0, genes - 1)
        keys = np.sort(rows * genes + columns)  # (rows in order, each row's genes sorted; np.unique is slower)
        keys = keys[np.concatenate([[True], keys[1:] != keys[:-1]])]  # (each gene once per cell)
        rows, columns = keys // genes, keys % genes
        indptr[start + 1:stop + 1] = indptr[start] + np.cumsum(np.bincount(rows, minlength=stop - start))
        all_indices.append(columns.astype(np.int32))
        all_data.append(generator.geometric(0.55, len(keys)).astype(np.float32))
    matrix = sp.csr_matrix((np.concatenate(all_data), np.concatenate(all_indices), indptr), shape=(cells, genes))
    weights = generator.dirichlet(np.full(TYPES, 2.0)) * 0.8 + 0.2 / TYPES  # (every type >= 1% of the cells)
    sizes = np.floor(weights / weights.sum() * cells).astype(np.int64)
    sizes[0] += cells - sizes.sum()
    types = generator.permutation(np.repeat(np.arange(TYPES), sizes))
    batches = generator.permutation(np.arange(cells) % BATCHES)
    return matrix, types, batches


def _spec(cells: int, genes: int) -> dict[str, Any]:
    return {"cells": cells, "genes": genes, "genes_per_cell": GENES_PER_CELL, "types": TYPES, "batches": BATCHES,
            "zarr_chunk": ZARR_CHUNK, "version": 1}


def is_built(data: str, cells: int, genes: int) -> bool:
    """Whether ``data`` holds all five copies of the data set of this size (the spec written after the last)."""
    try:
        with open(os.path.join(data, "spec.json")) as file:
            spec = json.load(file)
    except (OSError, ValueError):
        return False
    return spec == _spec(cells, genes) and all(os.path.exists(os.path.join(folder, name)) for name in FILES.values()
                                               for folder in (data, os.path.join(data, WARMUP)))


def build(data: str, cells: int, genes: int) -> dict[str, float]:
    """Write the five copies (see the module docstring), and the same of a tiny data set in ``data/warmup``; the
    seconds each copy of the data set took."""
    for name in [*FILES.values(), "spec.json", WARMUP]:
        _remove(os.path.join(data, name))
    os.makedirs(data, exist_ok=True)
    _write_copies(os.path.join(data, WARMUP), WARMUP_CELLS, genes)
    seconds = _write_copies(data, cells, genes)
    os.sync()
    with open(os.path.join(data, "spec.json"), "w") as file:
        json.dump(_spec(cells, genes), file)
    return seconds


def _write_copies(data: str, cells: int, genes: int) -> dict[str, float]:
    import anndata
    import pandas as pd
    import zarr

    from pydaf.interop.convert import convert

    os.makedirs(data, exist_ok=True)
    seconds = {}
    start = time.perf_counter()
    matrix, types, batches = generate(cells, genes)
    obs = pd.DataFrame({"type": pd.Categorical.from_codes(types, [f"T{index:02d}" for index in range(TYPES)]),
                        "batch": pd.Categorical.from_codes(batches, [f"B{index}" for index in range(BATCHES)])},
                       index=[f"C{index}" for index in range(cells)])
    var = pd.DataFrame(index=[f"G{index}" for index in range(genes)])
    seconds["generate"] = time.perf_counter() - start
    path = {kind: os.path.join(data, name) for kind, name in FILES.items()}
    start = time.perf_counter()
    anndata.AnnData(X=matrix, obs=obs, var=var).write_h5ad(path["h5ad"])
    seconds["h5ad"] = time.perf_counter() - start
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # (anndata's zarr v2 default, announced to change)
        group = zarr.open_group(path["zarr"], mode="w", zarr_format=anndata.settings.zarr_write_format)
        anndata.io.write_elem(group, "/", anndata.AnnData(X=matrix, obs=obs, var=var),
                              dataset_kwargs={"chunks": (ZARR_CHUNK,)})
    seconds["zarr"] = time.perf_counter() - start
    del matrix
    start = time.perf_counter()
    convert(path["h5ad"], path["h5df"], obs_is="cell", var_is="gene", X_is="UMIs", progress=False)
    seconds["h5df"] = time.perf_counter() - start
    for kind in ("files", "zarr-daf"):
        start = time.perf_counter()
        convert(path["h5df"], path[kind], progress=False)
        seconds[kind] = time.perf_counter() - start
    return seconds


def _remove(path: str) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)


def _files(path: str) -> list[str]:
    if os.path.isfile(path):
        return [path]
    return [os.path.join(folder, name) for folder, _, names in os.walk(path) for name in names]


def _bytes(path: str) -> int:
    return sum(os.path.getsize(name) for name in _files(path))


# Results and their fingerprints.


def _csr_hash(matrix: Any) -> str:
    """A hash of a CSR matrix's canonical arrays (sorted indices), shape included: equal hashes, equal matrices."""
    import scipy.sparse as sp

    matrix = sp.csr_matrix(matrix)
    matrix.sort_indices()
    digest = hashlib.sha256(repr(matrix.shape).encode())
    for array, dtype in ((matrix.indptr, np.int64), (matrix.indices, np.int64), (matrix.data, np.float64)):
        digest.update(np.ascontiguousarray(array, dtype=dtype).tobytes())
    return digest.hexdigest()


def fingerprints(totals: Any, means: Any, selected: Any) -> dict[str, Any]:
    """What a tool's results are compared by: the totals and the (type x gene) means as lists, the selection (cells x
    genes, CSR) by :func:`_csr_hash`."""
    return {"totals": np.asarray(totals, dtype=np.float64).ravel().tolist(),
            "means": np.asarray(means, dtype=np.float64).tolist(),
            "select": _csr_hash(selected)}


def reference(data: str) -> dict[str, Any]:
    """The results computed with h5py and scipy from the ``.h5ad`` (its CSR read whole, then freed)."""
    import h5py
    import scipy.sparse as sp

    with h5py.File(os.path.join(data, FILES["h5ad"]), "r") as file:
        group = file["X"]
        shape = tuple(group.attrs["shape"])
        matrix = sp.csr_matrix((group["data"][()], group["indices"][()], group["indptr"][()]), shape=shape)
        types = file["obs/type/codes"][()].astype(np.int64)
        batches = file["obs/batch/codes"][()].astype(np.int64)
        batch_names = [name.decode() if isinstance(name, bytes) else name for name in file["obs/batch/categories"]]
    totals = np.asarray(matrix.sum(axis=1, dtype=np.float64)).ravel()
    indicator = sp.csr_matrix((np.ones(shape[0]), (types, np.arange(shape[0]))), shape=(TYPES, shape[0]))
    means = (indicator @ matrix.astype(np.float64)).toarray() / np.bincount(types, minlength=TYPES)[:, None]
    selected = matrix[batches == batch_names.index(SELECTED_BATCH)]
    return fingerprints(totals, means, selected)


def compare(result: dict[str, Any], expected: dict[str, Any]) -> dict[str, bool]:
    """Per step, whether a tool's fingerprints equal the reference's."""
    means, expected_means = np.array(result["means"]), np.array(expected["means"])
    return {"totals": result["totals"] == expected["totals"],
            "means": means.shape == expected_means.shape and bool(np.allclose(means, expected_means, rtol=1e-5,
                                                                               atol=0)),
            "select": result["select"] == expected["select"]}


def written_equal(data: str, tool: str, totals: list[float]) -> bool:
    """Whether the vector the tool's ``write`` step wrote, read back by another reader, holds the totals."""
    name = written_name(tool)
    expected = np.array(totals)
    if tool.startswith("pydaf"):
        import pydaf

        daf = pydaf.open_daf(os.path.join(data, FILES[READS[tool]]), "r")
        return daf.has_vector("cell", name) and np.array_equal(np.asarray(daf.get_vector("cell", name)), expected)
    import anndata

    if tool == "zarr-dask":
        import zarr

        obs = anndata.io.read_elem(zarr.open_group(os.path.join(data, FILES["zarr"]), mode="r")["obs"])
    else:
        import h5py

        with h5py.File(os.path.join(data, FILES["h5ad"]), "r") as file:
            obs = anndata.io.read_elem(file["obs"])
    return name in obs.columns and np.array_equal(obs[name].to_numpy(dtype=np.float64), expected)


# Memory measurement.


def _status(field: str) -> int:
    """A field of ``/proc/self/status`` in bytes (0 where there is none)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


class AnonSampler:
    """A thread sampling this process's ``RssAnon`` every 5 ms; :meth:`take` gives the peak since the last take
    (and the value now) and starts a new window."""

    def __init__(self) -> None:
        self._peak = _status("RssAnon")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            value = _status("RssAnon")
            with self._lock:
                self._peak = max(self._peak, value)

    def take(self) -> int:
        value = _status("RssAnon")
        with self._lock:
            peak, self._peak = max(self._peak, value), value
        return peak


def _max_rss() -> int:
    """This process's peak RSS: ``VmHWM``, its own memory's high-water mark. (``getrusage(RUSAGE_SELF).ru_maxrss``
    is not: Linux carries the peak over ``exec`` from the memory the process had before it, a copy of its parent's,
    so a child of a large parent starts at the parent's peak; both are recorded, the table gives ``VmHWM``.)"""
    return _status("VmHWM")


def _ru_maxrss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _worker_start_sampler(dask_worker: Any) -> int:
    """(Run in each dask worker by ``client.run``) start the worker's :class:`AnonSampler`, kept on the worker (this
    function travels by value: its module's globals are not the worker's)."""
    dask_worker.bench_peers_sampler = AnonSampler()
    return 0


def _worker_take(dask_worker: Any) -> tuple[int, int]:
    """(Run in each dask worker) the worker's peak ``RssAnon`` since the last take, and its ``ru_maxrss``."""
    return dask_worker.bench_peers_sampler.take(), _max_rss()


# The tools' steps. Each is a function of the state the earlier steps left (a dict), run in a child process.

Steps = dict[str, Callable[[dict[str, Any]], None]]


def _pydaf_local(path: str, tool: str) -> Steps:
    import pydaf

    def open_(state: dict[str, Any]) -> None:
        state["daf"] = pydaf.open_daf(path, "r+")

    def totals(state: dict[str, Any]) -> None:
        state["totals"] = state["daf"].get_np_query(QUERIES["totals"])

    def means(state: dict[str, Any]) -> None:
        state["means"] = state["daf"].get_np_query(QUERIES["means"]).T  # (gene x type: the stored orientation)

    def select(state: dict[str, Any]) -> None:
        state["selected"] = state["daf"].get_np_query(QUERIES["select"]).T  # (CSC of gene x cell: CSR of cells)

    def write(state: dict[str, Any]) -> None:
        state["daf"].set_vector("cell", written_name(tool), state["totals"], overwrite=True)
        state["daf"].close()

    return {"open": open_, "totals": totals, "means": means, "select": select, "write": write}


def _type_indicator(codes: np.ndarray) -> Any:
    import scipy.sparse as sp

    return sp.csr_matrix((np.ones(len(codes), dtype=np.float32), (codes, np.arange(len(codes)))),
                         shape=(TYPES, len(codes)))


def _write_obs(path: str, obs: Any, tool: str, totals: np.ndarray) -> None:
    """Write ``obs`` with the totals as a new column into the ``.h5ad`` (only ``obs`` is rewritten)."""
    import anndata
    import h5py

    obs = obs.copy()
    obs[written_name(tool)] = totals
    with h5py.File(path, "r+") as file:
        anndata.io.write_elem(file, "obs", obs)


def _anndata_mem(path: str, tool: str) -> Steps:
    import anndata

    def open_(state: dict[str, Any]) -> None:
        state["adata"] = anndata.read_h5ad(path)

    def totals(state: dict[str, Any]) -> None:
        state["totals"] = np.asarray(state["adata"].X.sum(axis=1)).ravel()

    def means(state: dict[str, Any]) -> None:
        adata = state["adata"]
        codes = adata.obs["type"].cat.codes.to_numpy()
        sums = (_type_indicator(codes) @ adata.X).toarray()
        state["means"] = sums / np.bincount(codes, minlength=TYPES)[:, None]

    def select(state: dict[str, Any]) -> None:
        adata = state["adata"]
        state["selected"] = adata.X[(adata.obs["batch"] == SELECTED_BATCH).to_numpy()]

    def write(state: dict[str, Any]) -> None:
        _write_obs(path, state["adata"].obs, tool, state["totals"])

    return {"open": open_, "totals": totals, "means": means, "select": select, "write": write}


def _anndata_backed(path: str, tool: str) -> Steps:
    import anndata

    def open_(state: dict[str, Any]) -> None:
        state["adata"] = anndata.read_h5ad(path, backed="r")

    def totals(state: dict[str, Any]) -> None:
        parts = [np.asarray(chunk.sum(axis=1)).ravel() for chunk, _, _ in state["adata"].chunked_X(BACKED_ROWS)]
        state["totals"] = np.concatenate(parts)

    def means(state: dict[str, Any]) -> None:
        adata = state["adata"]
        codes = adata.obs["type"].cat.codes.to_numpy()
        indicator = _type_indicator(codes)
        sums = np.zeros((TYPES, adata.n_vars))
        for chunk, start, stop in adata.chunked_X(BACKED_ROWS):
            sums += (indicator[:, start:stop] @ chunk).toarray()
        state["means"] = sums / np.bincount(codes, minlength=TYPES)[:, None]

    def select(state: dict[str, Any]) -> None:
        adata = state["adata"]
        state["selected"] = adata[(adata.obs["batch"] == SELECTED_BATCH).to_numpy()].X

    def write(state: dict[str, Any]) -> None:
        adata = state["adata"]
        adata.file.close()  # (backed "r" can't write: h5py refuses a second, writable open of the file)
        _write_obs(path, adata.obs, tool, state["totals"])

    return {"open": open_, "totals": totals, "means": means, "select": select, "write": write}


def _block_cells(indptr: np.ndarray, start: int, stop: int) -> np.ndarray:
    """The cell (row) of each entry ``start:stop`` of a CSR's arrays."""
    first = int(np.searchsorted(indptr, start, side="right")) - 1
    last = int(np.searchsorted(indptr, stop, side="left"))
    bounds = np.clip(indptr[first:last + 1], start, stop)
    return np.repeat(np.arange(first, last, dtype=np.int64), np.diff(bounds))


def _block_totals(data: np.ndarray, indptr: np.ndarray, start: int) -> np.ndarray:
    cells = _block_cells(indptr, start, start + len(data))
    return np.bincount(cells, weights=data, minlength=len(indptr) - 1)


def _block_type_sums(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, codes: np.ndarray, start: int,
                     genes: int) -> np.ndarray:
    keys = codes[_block_cells(indptr, start, start + len(data))] * genes + indices
    return np.bincount(keys, weights=data, minlength=TYPES * genes)


def _block_select(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, chosen: np.ndarray,
                  start: int) -> tuple[np.ndarray, np.ndarray]:
    mask = chosen[_block_cells(indptr, start, start + len(data))]
    return data[mask], indices[mask]


def _zarr_dask(path: str, tool: str) -> Steps:
    import dask
    import dask.array as da
    import zarr

    def open_(state: dict[str, Any]) -> None:
        group = zarr.open_group(path, mode="r")
        state["shape"] = tuple(group["X"].attrs["shape"])
        state["data"] = da.from_zarr(group["X/data"], chunks=DASK_CHUNK)
        state["indices"] = da.from_zarr(group["X/indices"], chunks=DASK_CHUNK)
        state["indptr"] = group["X/indptr"][...].astype(np.int64)
        categories = {column: list(group[f"obs/{column}/categories"][...]) for column in ("type", "batch")}
        state["type"] = group["obs/type/codes"][...].astype(np.int64)
        state["chosen"] = group["obs/batch/codes"][...] == categories["batch"].index(SELECTED_BATCH)

    def _blocks(state: dict[str, Any]) -> Iterator[tuple[Any, Any, int]]:
        starts = np.concatenate([[0], np.cumsum(state["data"].chunks[0])])
        yield from zip(state["data"].to_delayed().ravel(), state["indices"].to_delayed().ravel(),
                       starts[:-1].tolist(), strict=True)

    def totals(state: dict[str, Any]) -> None:
        indptr = dask.delayed(state["indptr"])
        cells = state["shape"][0]
        parts = [da.from_delayed(dask.delayed(_block_totals)(data, indptr, start), (cells,), np.float64)
                 for data, _, start in _blocks(state)]
        state["totals"] = da.stack(parts).sum(axis=0).compute()

    def means(state: dict[str, Any]) -> None:
        indptr, codes = dask.delayed(state["indptr"]), dask.delayed(state["type"])
        genes = state["shape"][1]
        parts = [da.from_delayed(dask.delayed(_block_type_sums)(data, indices, indptr, codes, start, genes),
                                 (TYPES * genes,), np.float64) for data, indices, start in _blocks(state)]
        sums = da.stack(parts).sum(axis=0).compute().reshape(TYPES, genes)
        state["means"] = sums / np.bincount(state["type"], minlength=TYPES)[:, None]

    def select(state: dict[str, Any]) -> None:
        import scipy.sparse as sp

        indptr, chosen = dask.delayed(state["indptr"]), dask.delayed(state["chosen"])
        pieces = dask.compute(*[dask.delayed(_block_select)(data, indices, indptr, chosen, start)
                                for data, indices, start in _blocks(state)])
        counts = np.diff(state["indptr"])[state["chosen"]]
        state["selected"] = sp.csr_matrix((np.concatenate([piece[0] for piece in pieces]),
                                           np.concatenate([piece[1] for piece in pieces]),
                                           np.concatenate([[0], np.cumsum(counts)])),
                                          shape=(len(counts), state["shape"][1]))

    def write(state: dict[str, Any]) -> None:
        name = written_name(tool)
        totals = da.from_array(state["totals"], chunks=DASK_CHUNK)
        obs = zarr.open_group(path, mode="r+")["obs"]  # (in the store's own zarr format)
        target = obs.create_array(name, shape=totals.shape, dtype=totals.dtype, chunks=(DASK_CHUNK,),
                                  overwrite=True)
        da.store(totals, target, lock=False)
        target.attrs.update({"encoding-type": "array", "encoding-version": "0.2.0"})
        order = list(obs.attrs["column-order"])
        if name not in order:
            obs.attrs["column-order"] = [*order, name]

    return {"open": open_, "totals": totals, "means": means, "select": select, "write": write}


def _pydaf_dask(path: str, tool: str) -> Steps:
    import dask.array as da

    import pydaf
    import pydaf.dask as pydask

    def open_(state: dict[str, Any]) -> None:
        state["daf"] = pydaf.open_daf(path, "r+")

    def totals(state: dict[str, Any]) -> None:
        state["totals"] = pydask.get_np_query(state["daf"], QUERIES["totals"])

    def means(state: dict[str, Any]) -> None:
        state["means"] = np.asarray(pydask.get_np_query(state["daf"], QUERIES["means"])).T

    def select(state: dict[str, Any]) -> None:
        state["selected"] = pydask.get_np_query(state["daf"], QUERIES["select"]).T

    def write(state: dict[str, Any]) -> None:
        pydask.store_vector(state["daf"], "cell", written_name(tool), da.from_array(state["totals"]),
                            overwrite=True, progress=False)
        state["daf"].close()

    return {"open": open_, "totals": totals, "means": means, "select": select, "write": write}


_TOOL_STEPS = {"pydaf-h5df": _pydaf_local, "pydaf-files": _pydaf_local, "pydaf-zarr": _pydaf_local,
               "anndata-mem": _anndata_mem, "anndata-backed": _anndata_backed, "zarr-dask": _zarr_dask,
               "pydaf-dask": _pydaf_dask}


@contextlib.contextmanager
def _cluster(tool: str) -> Iterator[Any]:
    """The dask tools' ``LocalCluster`` (2 worker processes of one thread) and its client; nothing for the others."""
    if not tool.endswith("-dask"):
        yield None
        return
    import logging

    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None,
                      silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        client.run(_worker_start_sampler)
        yield client


def child(tool: str, data: str) -> dict[str, Any]:
    """Run the tool's steps in this (fresh) process: per step its seconds, the process's ``ru_maxrss`` at its end and
    the peak anon RSS during it (with the workers' for a dask tool), then the results' fingerprints."""
    record: dict[str, Any] = {"seconds": {}, "rss": {}, "anon": {}, "workers_rss": {}, "workers_anon": {}}
    with _cluster(tool) as client:
        start = time.perf_counter()
        warmup = _TOOL_STEPS[tool](os.path.join(data, WARMUP, FILES[READS[tool]]), tool)
        state: dict[str, Any] = {}
        for step in STEPS:
            warmup[step](state)
        record["warmup"] = time.perf_counter() - start
        steps = _TOOL_STEPS[tool](os.path.join(data, FILES[READS[tool]]), tool)
        sampler = AnonSampler()
        if client is not None:
            client.run(_worker_take)
        state = {}
        for step in STEPS:
            start = time.perf_counter()
            steps[step](state)
            record["seconds"][step] = time.perf_counter() - start
            record["anon"][step] = sampler.take()
            record["rss"][step] = _max_rss()
            record.setdefault("ru_maxrss", {})[step] = _ru_maxrss()
            if client is not None:
                taken = client.run(_worker_take)
                record["workers_anon"][step] = sum(anon for anon, _ in taken.values())
                record["workers_rss"][step] = sum(rss for _, rss in taken.values())
    record["results"] = fingerprints(state["totals"], state["means"], state["selected"])
    return record


def run_child(tool: str, data: str) -> dict[str, Any]:
    # (the child imports this checkout's pydaf, as the parent does; so do the dask workers it starts)
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([REPOSITORY, os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", tool, "--data", data],
                            capture_output=True, text=True, env=environment)
    if result.returncode != 0:
        raise RuntimeError(f"the child {tool} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.splitlines()[-1])


def _available(tool: str) -> str | None:
    """Why the tool can't run here (a missing package), or ``None``."""
    import importlib.util

    needs = {"anndata-mem": ["anndata"], "anndata-backed": ["anndata"], "zarr-dask": ["zarr", "dask", "distributed"],
             "pydaf-dask": ["dask", "distributed"]}.get(tool, [])
    missing = [name for name in needs if importlib.util.find_spec(name) is None]
    if tool == "pydaf-dask" and not missing:
        with contextlib.suppress(ImportError):
            import pydaf.dask as pydask

            if all(hasattr(pydask, name) for name in ("get_np_query", "store_vector")):
                return None
        return "pydaf.dask has no get_np_query/store_vector yet"
    return f"not installed: {', '.join(missing)}" if missing else None


def _print_table(runs: dict[str, list[dict[str, Any]]], skipped: dict[str, str]) -> None:
    best = {(tool, step): min(run["seconds"][step] for run in tool_runs) for tool, tool_runs in runs.items()
            for step in STEPS}
    width = max(len("tool"), *map(len, [*runs, *skipped]))
    print(f"{'tool':<{width}} {'step':<7} {'best s':>8} {'median s':>9} {'vs pydaf':>9} {'RSS MB':>8} "
          f"{'anon MB':>8}")
    for tool in TOOLS:
        if tool in skipped:
            print(f"{tool:<{width}} {'-':<7} {'-':>8} {'-':>9} {'-':>9} {'-':>8} {'-':>8}  ({skipped[tool]})")
            continue
        if tool not in runs:
            continue
        for step in STEPS:
            times = [run["seconds"][step] for run in runs[tool]]
            local = [best[(other, step)] for other in PYDAF_LOCAL if other in runs]
            ratio = f"{min(times) / min(local):>8.2f}x" if local else f"{'-':>9}"
            rss = max(run["rss"][step] + run["workers_rss"].get(step, 0) for run in runs[tool])
            anon = max(run["anon"][step] + run["workers_anon"].get(step, 0) for run in runs[tool])
            print(f"{tool:<{width}} {step:<7} {min(times):>8.3f} {statistics.median(times):>9.3f} {ratio} "
                  f"{rss / MB:>8.0f} {anon / MB:>8.0f}")


def _peak(runs: list[dict[str, Any]], key: str) -> int:
    return max(max(run[key][step] + run["workers_" + key].get(step, 0) for step in STEPS) for run in runs)


def _verdicts(runs: dict[str, list[dict[str, Any]]]) -> list[str]:
    best = {(tool, step): min(run["seconds"][step] for run in tool_runs) for tool, tool_runs in runs.items()
            for step in STEPS}
    local = [tool for tool in PYDAF_LOCAL if tool in runs]
    peers = [tool for tool in PEERS if tool in runs]
    lines = []
    if local and peers:
        parts = []
        for step in STEPS:
            ours = min(best[(tool, step)] for tool in local)
            theirs_tool = min(peers, key=lambda tool: best[(tool, step)])
            ratio = ours / best[(theirs_tool, step)]
            parts.append(f"{step} {ratio:.2f}x of {theirs_tool} {'MET' if ratio <= 1.2 else 'NOT MET'}")
        lines.append("pydaf local fastest or within 1.2x of the fastest peer: " + "; ".join(parts))
        for key, what in (("rss", "peak RSS"), ("anon", "peak anon RSS")):
            ours_tool = min(local, key=lambda tool: _peak(runs[tool], key))
            theirs_tool = min(peers, key=lambda tool: _peak(runs[tool], key))
            ours, theirs = _peak(runs[ours_tool], key), _peak(runs[theirs_tool], key)
            lines.append(f"pydaf local lowest {what}: {ours_tool} {ours / MB:.0f} MB, lowest peer {theirs_tool} "
                         f"{theirs / MB:.0f} MB {'MET' if ours < theirs else 'NOT MET'}")
    if "pydaf-dask" in runs:
        parts = []
        for step in ("totals", "means"):
            for peer in ("anndata-backed", "zarr-dask"):
                if peer in runs:
                    ratio = best[("pydaf-dask", step)] / best[(peer, step)]
                    parts.append(f"{step} {ratio:.2f}x of {peer} {'MET' if ratio < 1 else 'NOT MET'}")
        lines.append("pydaf on dask faster than anndata-backed and zarr-dask on the reductions: " + "; ".join(parts))
    return lines


@recording_main(__file__)
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", metavar="PATH", help=OUTPUT_HELP)
    parser.add_argument("--data", default=DEFAULT_DATA, help="where the five copies of the data set are (built once)")
    parser.add_argument("--scale", type=float, default=1.0, help=f"the cells are {CELLS:,} x SCALE")
    parser.add_argument("--genes", type=int, default=GENES)
    parser.add_argument("--tools", default=",".join(TOOLS), help="a comma-separated subset of " + ",".join(TOOLS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the data set (reused by the next run)")
    parser.add_argument("--child", metavar="TOOL", help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    if arguments.child:
        print(json.dumps(child(arguments.child, arguments.data)))
        return 0

    cells = max(100, round(CELLS * arguments.scale))
    tools = [tool for tool in arguments.tools.split(",") if tool]
    unknown = sorted(set(tools) - set(TOOLS))
    if unknown:
        parser.error(f"unknown tools: {', '.join(unknown)} (known: {', '.join(TOOLS)})")
    skipped = {tool: reason for tool in tools if (reason := _available(tool)) is not None}
    tools = [tool for tool in tools if tool not in skipped]
    built = None
    if not is_built(arguments.data, cells, arguments.genes):
        start = time.perf_counter()
        built = build(arguments.data, cells, arguments.genes)
        built["total"] = time.perf_counter() - start
    expected = reference(arguments.data)
    runs: dict[str, list[dict[str, Any]]] = {tool: [] for tool in tools}
    for _ in range(arguments.repeats):
        for tool in tools:
            warm(_files(os.path.join(arguments.data, FILES[READS[tool]])))
            runs[tool].append(run_child(tool, arguments.data))

    sizes = {kind: _bytes(os.path.join(arguments.data, name)) for kind, name in FILES.items()}
    import h5py

    with h5py.File(os.path.join(arguments.data, FILES["h5ad"]), "r") as file:
        nnz = file["X/data"].shape[0]
    print(f"data: {cells:,} cells x {arguments.genes:,} genes, {nnz:,} stored Float32 counts "
          f"({nnz / cells:,.0f} per cell, {nnz * 8 / 1e9:.2f} GB of values and indices); on disk: "
          + ", ".join(f"{kind} {size / 1e9:.2f} GB" for kind, size in sizes.items()))
    if built is not None:
        print("built: " + ", ".join(f"{kind} {seconds:.1f} s" for kind, seconds in built.items()))
    if arguments.repeats == 0:  # (only the data set built)
        return 0
    print(f"{arguments.repeats} runs per tool, interleaved, each a fresh process after a warm read of its files; dask "
          "tools on LocalCluster(n_workers=2, processes=True, threads_per_worker=1), RSS = client + workers")
    _print_table(runs, skipped)
    print("workflow (sum of the steps' best s): " + ", ".join(
        f"{tool} {sum(min(run['seconds'][step] for run in runs[tool]) for step in STEPS):.2f}" for tool in tools))
    print("start-up (untimed: the workflow on a 200-cell copy first, so each tool's first-call costs are paid; "
          "median s): " + ", ".join(f"{tool} {statistics.median(run['warmup'] for run in runs[tool]):.2f}"
                                    for tool in tools))
    equal_lines = []
    for step in STEPS:
        if step == "open":
            continue
        verdicts = []
        for tool in tools:
            if step == "write":
                good = written_equal(arguments.data, tool, expected["totals"])
            else:
                good = all(compare(run["results"], expected)[step] for run in runs[tool])
            verdicts.append(f"{tool} {'yes' if good else 'no'}")
        equal_lines.append(f"equal {step}: " + ", ".join(verdicts))
    print("\n".join(equal_lines))
    print("\n".join(_verdicts(runs)))
    if not arguments.keep:
        for name in [*FILES.values(), "spec.json", WARMUP]:
            _remove(os.path.join(arguments.data, name))
    return 0 if not any(verdict.endswith(" no") for line in equal_lines for verdict in line.split(", ")) else 1


if __name__ == "__main__":
    sys.exit(main())
