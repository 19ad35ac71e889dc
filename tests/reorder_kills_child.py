"""Child programs of the reorder kill tests (``tests/test_reorder_kills.py``), run as ``python
tests/reorder_kills_child.py COMMAND FORMAT PATH ...`` in fresh processes (spawned, never forked from the test runner),
so that a SIGKILL lands in a real process that holds the real locks and mappings.

The data set (:func:`original_data`) has two permuted axes (``cell``, ``gene``) and an unpermuted one (``batch``):
dense and sparse number vectors, string vectors, a dense and a sparse cell x gene matrix and a cell x batch string
matrix stored in both layouts, a square cell x cell matrix, and a batch x gene matrix in one layout. The expected
content after any sequence of reorders is computed here from the original arrays (numpy indexing, not pydaf's kernels),
and both sides compare per-property digests of the dense values.

Commands (each prints one JSON line, or ``go`` / ``took`` lines for ``reorder``):

- ``create FORMAT PATH SCALE``: write the data set.
- ``reorder FORMAT PATH SCALE SEED``: open it writable, print ``go``, reorder both axes by the permutations of
  ``SEED`` (:func:`permutations`), print ``took SECONDS``. The parent kills it at a random instant.
- ``check FORMAT PATH SCALE SEED MODE``: what a fresh process finds after a kill: a read-only open (the digests, or the
  error that refused it), then a writable open that recovers (``MODE`` ``reset``: and ``reset_reorder_axes``;
  ``reopen``: the open alone), the digests after recovery (a first JSON line); then the same reorder again to
  completion and the digests of a fresh read-only open after it (a second line).
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
import time
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp

import pydaf

# (``h5df-backup``: H5df by Julia's protocol, a backup then the permutation in place, as for several groups of a file)
FORMATS = {"h5df": pydaf.H5df, "h5df-backup": pydaf.H5df, "files": pydaf.FilesDaf, "zarr": pydaf.ZarrDaf}
PERMUTED = ("cell", "gene")

#: (rows_axis, columns_axis, name) of every matrix as stored (both layouts listed where both are stored).
MATRICES = [("cell", "gene", "UMIs"), ("gene", "cell", "UMIs"), ("cell", "gene", "sparse_UMIs"),
            ("gene", "cell", "sparse_UMIs"), ("cell", "batch", "label"), ("batch", "cell", "label"),
            ("cell", "cell", "distances"), ("batch", "gene", "totals")]


def sizes(scale: float) -> dict[str, int]:
    return {"cell": max(8, int(2000 * scale)), "gene": max(6, int(1500 * scale)), "batch": 5}


@functools.lru_cache(maxsize=2)
def original_data(scale: float) -> dict[str, Any]:
    """The arrays of the data set before any reorder: ``{"axes": {axis: entries}, "vectors": {(axis, name): dense},
    "sparse_vectors": {...}, "matrices": {(rows, cols, name): dense (rows x cols)}, "sparse_matrices": {...}}``."""
    n = sizes(scale)
    generator = np.random.default_rng(20261127)
    axes = {axis: np.array([f"{axis[0].upper()}{index}" for index in range(length)], dtype=object)
            for axis, length in n.items()}
    vectors = {
        ("cell", "age"): generator.random(n["cell"]),
        ("cell", "count"): generator.integers(0, 1000, n["cell"]).astype(np.int32),
        ("cell", "color"): np.array([f"color{value}" for value in generator.integers(0, 50, n["cell"])], dtype=object),
        ("gene", "symbol"): np.array([f"sym{index}-{value}" for index, value in
                                      enumerate(generator.integers(0, 9, n["gene"]))], dtype=object),
        ("batch", "donor"): np.array([f"donor{index}" for index in range(n["batch"])], dtype=object),
    }
    sparse_vectors = {
        ("cell", "score"): (generator.random(n["cell"]) * (generator.random(n["cell"]) < 0.1)).astype(np.float32),
        ("gene", "marker"): (generator.integers(1, 5, n["gene"]) * (generator.random(n["gene"]) < 0.2)).astype(
            np.int64),
    }
    umis = generator.random((n["cell"], n["gene"]), dtype=np.float32)
    sparse_umis = (generator.random((n["cell"], n["gene"]), dtype=np.float32)
                   * (generator.random((n["cell"], n["gene"])) < 0.05)).astype(np.float32)
    labels = np.array([f"L{value}" if value % 3 else "" for value in generator.integers(0, 30, n["cell"] * n["batch"])],
                      dtype=object).reshape(n["cell"], n["batch"])
    matrices = {
        ("cell", "gene", "UMIs"): umis,
        ("cell", "batch", "label"): labels,
        ("cell", "cell", "distances"): generator.random((n["cell"], n["cell"]), dtype=np.float32),
        ("batch", "gene", "totals"): generator.random((n["batch"], n["gene"])),
    }
    return {"axes": axes, "vectors": vectors, "sparse_vectors": sparse_vectors, "matrices": matrices,
            "sparse_matrices": {("cell", "gene", "sparse_UMIs"): sparse_umis}}


def permutations(scale: float, seed: int) -> dict[str, np.ndarray]:
    """The 0-based permutations of the permuted axes used by the reorder of ``seed``."""
    generator = np.random.default_rng(seed)
    return {axis: generator.permutation(length) for axis, length in sizes(scale).items() if axis in PERMUTED}


def create(kind: str, path: str, scale: float) -> None:
    data = original_data(scale)
    daf = FORMATS[kind](path, "w", name="reorder-kills")
    daf.set_scalar("version", "reorder kills")
    for axis, entries in data["axes"].items():
        daf.add_axis(axis, entries)
    for (axis, name), values in data["vectors"].items():
        daf.set_vector(axis, name, values)
    for (axis, name), values in data["sparse_vectors"].items():
        daf.set_vector(axis, name, pydaf.SparseVector.from_dense(values))
    for (rows_axis, columns_axis, name), values in data["matrices"].items():
        both = rows_axis != columns_axis and name != "totals"
        daf.set_matrix(rows_axis, columns_axis, name, np.asfortranarray(values), relayout=both)
    for (rows_axis, columns_axis, name), values in data["sparse_matrices"].items():
        daf.set_matrix(rows_axis, columns_axis, name, sp.csc_matrix(values), relayout=True)
    daf.close()


# Digests of the dense values of every property, computed the same way from pydaf's values and from the model.


def digest(values: Any) -> str:
    if isinstance(values, pydaf.SparseVector | pydaf.SparseMatrixCSC):
        values = values.to_dense()
    elif sp.issparse(values):
        values = values.toarray()
    array = np.asarray(values)
    if array.dtype.kind in "OUS":
        return hashlib.sha1(repr(array.tolist()).encode()).hexdigest()
    return hashlib.sha1(np.ascontiguousarray(array).tobytes() + str(array.dtype).encode()).hexdigest()


def expected_digests(scale: float, orders: dict[str, np.ndarray]) -> dict[str, str]:
    """The digests of the data set whose axis ``a`` holds the original entries ``orders[a]`` (0-based indices)."""
    data = original_data(scale)
    order = {axis: orders.get(axis, np.arange(len(entries))) for axis, entries in data["axes"].items()}
    found = {"scalar version": digest(np.array(["reorder kills"], dtype=object))}
    for axis, entries in data["axes"].items():
        found[f"axis {axis}"] = digest(entries[order[axis]])
    for (axis, name), values in {**data["vectors"], **data["sparse_vectors"]}.items():
        found[f"vector {axis} {name}"] = digest(values[order[axis]])
    matrices = {**data["matrices"], **data["sparse_matrices"]}
    for rows_axis, columns_axis, name in MATRICES:
        values = matrices.get((rows_axis, columns_axis, name))
        if values is None:
            values = matrices[(columns_axis, rows_axis, name)].T
        found[f"matrix {rows_axis} {columns_axis} {name}"] = digest(
            np.asfortranarray(values[order[rows_axis]][:, order[columns_axis]]))
    return found


def digests(daf: pydaf.DafReader) -> dict[str, str]:
    """The digests of what ``daf`` holds, in the keys of :func:`expected_digests` (and any extra property too)."""
    found = {f"scalar {name}": digest(np.array([daf.get_scalar(name)], dtype=object)) for name in daf.scalars_set()}
    for axis in daf.axes_set():
        found[f"axis {axis}"] = digest(daf.axis_vector(axis))
        for name in daf.vectors_set(axis):
            found[f"vector {axis} {name}"] = digest(daf.get_stored_vector(axis, name))
    for rows_axis in daf.axes_set():
        for columns_axis in daf.axes_set():
            for name in daf.matrices_set(rows_axis, columns_axis, relayout=False, tensors=False):
                found[f"matrix {rows_axis} {columns_axis} {name}"] = digest(
                    daf.get_stored_matrix(rows_axis, columns_axis, name, relayout=False))
    return found


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def reorder(kind: str, path: str, scale: float, seed: int) -> None:
    from pydaf.core.reorder import reorder_axes

    daf = FORMATS[kind](path, "r+")
    planned = permutations(scale, seed)
    _say("go")
    started = time.monotonic()
    reorder_axes(daf, planned, progress=False)
    _say(f"took {time.monotonic() - started}")
    daf.close()


def check(kind: str, path: str, scale: float, seed: int, mode: str) -> None:
    from pydaf.core.reorder import reorder_axes, reset_reorder_axes

    found: dict[str, Any] = {}
    try:
        reader = FORMATS[kind](path, "r")
        found["read_only"] = digests(reader)
        reader.close()
    except pydaf.DafError as error:
        found["read_only_error"] = f"{type(error).__name__}: {error}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        writer = FORMATS[kind](path, "r+")
        if mode == "reset":
            found["reset"] = reset_reorder_axes(writer)
        writer.close()
    found["warnings"] = [str(warning.message) for warning in caught]
    reader = FORMATS[kind](path, "r")
    found["recovered"] = digests(reader)
    reader.close()
    _say(json.dumps(found))  # (before the reorder runs again, so that a failure of it still shows the recovery)
    writer = FORMATS[kind](path, "r+")
    started = time.monotonic()
    reorder_axes(writer, permutations(scale, seed), progress=False)
    took = time.monotonic() - started
    writer.close()
    reader = FORMATS[kind](path, "r")
    _say(json.dumps({"completed": digests(reader), "took": took}))
    reader.close()


def main(arguments: list[str]) -> None:
    command, kind, path, scale = arguments[0], arguments[1], arguments[2], float(arguments[3])
    if kind == "h5df-backup":
        from pydaf.formats.h5df import reorder as h5df_reorder

        h5df_reorder.REORDER_BY_SWAP = False
    if command == "create":
        create(kind, path, scale)
    elif command == "reorder":
        reorder(kind, path, scale, int(arguments[4]))
    elif command == "check":
        check(kind, path, scale, int(arguments[4]), arguments[5])
    else:
        raise SystemExit(f"unknown command: {command}")


if __name__ == "__main__":
    main(sys.argv[1:])
