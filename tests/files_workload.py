"""A deterministic FilesDaf write workload, for the tests that run it in child processes (killed at random moments,
or read concurrently), and what every property may hold after any prefix of it.

Operation ``i`` is drawn from ``random.Random(i)``: it sets, overwrites (changing the form: dense, sparse, strings,
built in place), or deletes a scalar, vector or matrix from small pools of names, with values that encode ``i``. So a
property's value names the operation that wrote it, and :func:`observed` can tell a whole, consistent property from a
mixed or partial one.
"""

from __future__ import annotations

import random
import sys
from itertools import count

import numpy as np
import scipy.sparse as sp

import pydaf

CELLS, GENES = 20_000, 20
KINDS = ("scalar", "delete_scalar", "vector", "sparse_vector", "string_vector", "build_vector", "delete_vector",
         "matrix", "sparse_matrix", "build_sparse_matrix", "delete_matrix")

State = dict[str, tuple[str, int]]


def create(path: str) -> None:
    pydaf.FilesDaf(path, "w").add_axis("cell", [f"c{index}" for index in range(CELLS)]).add_axis(
        "gene", [f"g{index}" for index in range(GENES)])


def operation(index: int) -> tuple[str, str]:
    """The kind and the property name of operation ``index``."""
    generator = random.Random(index)
    kind = generator.choice(KINDS)
    pool = "s" if "scalar" in kind else "v" if "vector" in kind else "m"
    return kind, f"{pool}{generator.randrange(4)}"


def _sparse_rows(n_rows: int, column: int) -> np.ndarray:
    return np.arange(column % 5, n_rows, 5)


def _sparse_matrix(shape: tuple[int, int], value: int) -> sp.csc_matrix:
    rows = [_sparse_rows(shape[0], column) for column in range(shape[1])]
    columns = np.repeat(np.arange(shape[1]), [len(part) for part in rows])
    return sp.csc_matrix((np.full(len(columns), float(value)), (np.concatenate(rows), columns)), shape=shape)


def apply(daf: pydaf.DafWriter, index: int) -> None:
    """Do operation ``index`` (again, if it was done: every operation can be repeated)."""
    kind, name = operation(index)
    if kind == "scalar":
        daf.set_scalar(name, np.int64(index), overwrite=True)
    elif kind == "delete_scalar":
        daf.delete_scalar(name, must_exist=False)
    elif kind == "vector":
        daf.set_vector("cell", name, np.full(CELLS, float(index)), overwrite=True)
    elif kind == "sparse_vector":
        nzind = np.arange(1, CELLS + 1, 3, dtype=np.int64)
        daf.set_vector("cell", name, pydaf.SparseVector(CELLS, nzind, np.full(len(nzind), index, np.float32)),
                       overwrite=True)
    elif kind == "string_vector":
        daf.set_vector("cell", name, np.full(CELLS, f"v{index}", dtype=object), overwrite=True)
    elif kind == "build_vector":
        with daf.empty_dense_vector("cell", name, "Int64", overwrite=True) as buffer:
            buffer[:] = index
    elif kind == "delete_vector":
        daf.delete_vector("cell", name, must_exist=False)
    elif kind == "matrix":
        daf.set_matrix("cell", "gene", name, np.full((CELLS, GENES), index, np.float32), overwrite=True)
    elif kind == "sparse_matrix":
        daf.set_matrix("cell", "gene", name, _sparse_matrix((CELLS, GENES), index), overwrite=True)
    elif kind == "build_sparse_matrix":
        matrix = _sparse_matrix((CELLS, GENES), index)
        with daf.empty_sparse_matrix("cell", "gene", name, "Float64", matrix.nnz, "UInt32",
                                     overwrite=True) as (colptr, rowval, nzval):
            colptr[:] = matrix.indptr + 1
            rowval[:] = matrix.indices + 1
            nzval[:] = matrix.data
    else:
        daf.delete_matrix("cell", "gene", name, must_exist=False)


def advance(state: State, index: int) -> State:
    """The properties after operation ``index``: each key maps to ``(form, index of the operation that wrote it)``."""
    kind, name = operation(index)
    state = dict(state)
    if kind == "scalar":
        state[f"scalars/{name}"] = ("scalar", index)
    elif kind == "delete_scalar":
        state.pop(f"scalars/{name}", None)
    elif kind in ("vector", "sparse_vector", "string_vector", "build_vector"):
        state[f"vectors/cell/{name}"] = (kind, index)
    elif kind == "delete_vector":
        state.pop(f"vectors/cell/{name}", None)
    elif kind in ("matrix", "sparse_matrix"):
        state[f"matrices/cell/gene/{name}"] = state[f"matrices/gene/cell/{name}"] = (kind, index)
    elif kind == "build_sparse_matrix":  # this layout only; the other keeps what it had
        state[f"matrices/cell/gene/{name}"] = ("sparse_matrix", index)
    else:
        state.pop(f"matrices/cell/gene/{name}", None)
        state.pop(f"matrices/gene/cell/{name}", None)
    return state


def _same(values: np.ndarray) -> float | None:
    return None if len(values) == 0 or not (values == values[0]).all() else values[0]


def observed(daf: pydaf.DafReader, key: str) -> tuple[str, int] | str:
    """What a property holds, as ``(form, index)`` if it is whole and consistent, else a description of the problem
    (``"missing"`` if it does not exist)."""
    kind, *parts = key.split("/")
    if kind == "scalars":
        if not daf.has_scalar(parts[0]):
            return "missing"
        value = daf.get_scalar(parts[0])
        return ("scalar", int(value)) if isinstance(value, np.int64) else f"scalar {value!r}"
    if kind == "vectors":
        if not daf.has_vector(*parts):
            return "missing"
        vector = daf.get_stored_vector(*parts)
        if isinstance(vector, pydaf.SparseVector):
            value = _same(vector.nzval)
            good = vector.nzval.dtype == np.float32 and np.array_equal(vector.nzind, np.arange(1, CELLS + 1, 3))
            return ("sparse_vector", int(value)) if good and value is not None else "mixed sparse vector"
        if vector.shape != (CELLS,):
            return f"vector of shape {vector.shape}"
        value = _same(vector)
        if value is None:
            return f"mixed {vector.dtype} vector"
        if vector.dtype == object:
            return ("string_vector", int(value[1:]))
        forms = {np.dtype(np.float64): "vector", np.dtype(np.int64): "build_vector"}
        return (forms[vector.dtype], int(value)) if vector.dtype in forms else f"vector of type {vector.dtype}"
    rows_axis, columns_axis, name = parts
    if not daf.has_matrix(rows_axis, columns_axis, name, relayout=False):
        return "missing"
    matrix = daf.get_stored_matrix(rows_axis, columns_axis, name, relayout=False)
    shape = (CELLS, GENES) if rows_axis == "cell" else (GENES, CELLS)
    if matrix.shape != shape:
        return f"matrix of shape {matrix.shape}"
    if isinstance(matrix, pydaf.SparseMatrixCSC):
        value = _same(matrix.nzval)
        expected = _sparse_matrix((CELLS, GENES), 1)
        expected = expected if rows_axis == "cell" else expected.T.tocsc()
        scipy = matrix.to_scipy()
        good = value is not None and matrix.dtype == np.float64 and np.array_equal(
            scipy.indptr, expected.indptr) and np.array_equal(scipy.indices, expected.indices)
        return ("sparse_matrix", int(value)) if good else "mixed sparse matrix"
    value = _same(np.asarray(matrix).reshape(-1))
    return ("matrix", int(value)) if value is not None and matrix.dtype == np.float32 else "mixed dense matrix"


def keys(daf: pydaf.DafReader) -> set[str]:
    """The keys of every property of the workload's kinds present in a data set."""
    found = {f"scalars/{name}" for name in daf.scalars_set()}
    found |= {f"vectors/cell/{name}" for name in daf.vectors_set("cell")}
    for rows_axis, columns_axis in (("cell", "gene"), ("gene", "cell")):
        found |= {f"matrices/{rows_axis}/{columns_axis}/{name}"
                  for name in daf.matrices_set(rows_axis, columns_axis, relayout=False)}
    return found


def run(path: str, start: int) -> None:
    """The child process: open for writing, then do operations from ``start`` on, printing each one done."""
    daf = pydaf.FilesDaf(path, "r+")
    print("ready", flush=True)
    for index in count(start):
        apply(daf, index)
        print(index, flush=True)


if __name__ == "__main__":
    run(sys.argv[1], int(sys.argv[2]))
