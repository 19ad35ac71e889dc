"""A reduction over a large memory-mapped matrix releases the pages it is done with, a piece at a time, so the
process's peak resident set (which a cluster's scheduler or a container's limit measures, mapped file pages
included) grows by a few pieces, not by the matrix (pydaf/kernels/reductions.py ``_streamed``). Each query runs in a
child process that reads its own peak (``VmHWM``) before and after."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pydaf

from . import hostile

N_CELLS, N_GENES = 400_000, 120  # every other cell in every gene: 24M entries, 96 MB of Float32 values, 96 MB of rows
PER_GENE = N_CELLS // 2

QUERIES = ["@ cell @ gene :: UMIs >- Sum", "@ cell @ gene :: UMIs >- Mean", "@ cell @ gene :: UMIs >- Max",
           "@ cell @ gene :: UMIs >- Var", "@ cell @ gene :: UMIs >| Sum", "@ cell @ gene :: UMIs |/ type >| Sum"]

_CHILD = """
import json, sys
import numpy
import pydaf
from pydaf._os.maps import release_mapped_pages
from tests.worker_memory import reset_peak, peak_rss

daf = pydaf.H5df(sys.argv[1], "r")
query = sys.argv[2]
daf.get_stored_matrix("cell", "gene", "UMIs").rowval  # (checked once: the check releases its own pages)
daf.get_np_query(query, cache=False)  # (kernels loaded: not measured)
release_mapped_pages()  # (whatever the first run left resident)
before = reset_peak()
result = daf.get_np_query(query, cache=False)
print(json.dumps({"growth": peak_rss() - before, "result": numpy.asarray(result, dtype=numpy.float64).ravel()[:5]
                  .tolist(), "shape": list(numpy.shape(result))}))
"""


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("streamed") / "large.h5df"
    daf = pydaf.H5df(path, "w").add_axis("cell", [f"c{index}" for index in range(N_CELLS)])
    daf.add_axis("gene", [f"g{index}" for index in range(N_GENES)])
    daf.set_vector("gene", "type", np.array(["A", "B", "C"])[np.arange(N_GENES) % 3])
    with daf.empty_sparse_matrix("cell", "gene", "UMIs", "Float32", N_GENES * PER_GENE, "UInt32") as (colptr, rowval,
                                                                                                       nzval):
        colptr[:] = np.arange(N_GENES + 1, dtype=np.uint32) * PER_GENE + 1
        rowval[:] = np.tile(np.arange(1, N_CELLS + 1, 2, dtype=np.uint32), N_GENES)
        nzval[:] = np.repeat(np.arange(1, N_GENES + 1, dtype=np.float32), PER_GENE)
    daf.close()
    return path


@pytest.mark.parametrize("query", QUERIES)
def test_a_reduction_of_a_mapped_matrix_holds_a_few_pieces_of_it(large: Path, query: str):
    environment = {**os.environ, "PYTHONPATH": f"{hostile.ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    result = subprocess.run([sys.executable, "-c", _CHILD, str(large), query], capture_output=True, text=True,
                            env=environment, check=False, cwd=hostile.ROOT)
    assert result.returncode == 0, result.stderr
    measured = json.loads(result.stdout)
    read_bytes = N_GENES * PER_GENE * 4 * (1 if ">-" in query else 2)  # (the values, and the rows if it needs them)
    # At most a piece of values (and rows) per thread in flight, against the 96 MB of values (and 96 MB of rows).
    assert measured["growth"] < 0.5 * read_bytes, measured
    gene_values = np.arange(1, N_GENES + 1, dtype=np.float64)
    every_other = np.array([1.0, 0.0, 1.0, 0.0, 1.0])
    expected = {
        "@ cell @ gene :: UMIs >- Sum": gene_values * PER_GENE,
        "@ cell @ gene :: UMIs >- Mean": gene_values / 2,
        "@ cell @ gene :: UMIs >- Max": gene_values,
        "@ cell @ gene :: UMIs >- Var": gene_values ** 2 / 4,
        "@ cell @ gene :: UMIs >| Sum": every_other * gene_values.sum(),
        "@ cell @ gene :: UMIs |/ type >| Sum": np.array([*(gene_values[group::3].sum() for group in range(3)), 0, 0]),
    }[query]
    assert np.allclose(measured["result"], expected[:5], rtol=1e-6), (measured, expected[:5])  # (C order)
