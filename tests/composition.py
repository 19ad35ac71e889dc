"""Julia's recorded composition cases (``../shared/fixtures/parity/composition_cases.json``, described in
``COMPOSITION.md`` beside it): running a record's ``setup_ops`` and its ``call`` with pydaf, and comparing the result
with what Julia's test asserted.

A record is run by a :class:`Session`: its variables (data sets, arrays, results) start empty, each op is looked up in
``OPS`` by name and applied, and the call's value is compared by :func:`assert_expected` (Julia ``==``: values, not
types, except where the record asserts a type). ``new_memory_daf`` makes the data sets of the backend the session runs
on: ``memory`` (a :class:`pydaf.MemoryDaf`) or ``h5df`` (a mapped :class:`pydaf.H5df` file of the same name, so every
record also runs on memory-mapped storage). Julia values follow ``COMPOSITION.md`` §5.2: 1-based indices, row-major
matrix literals, ``{"ref": var}`` for variables.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import pydaf

from .parity import assert_error_message, julia_dtype, julia_equal, load_cases

FILES = ("test/views.jl", "test/chains.jl", "test/copies.jl", "test/concat.jl", "test/read_only.jl", "test/keys.jl",
         "test/contracts.jl", "test/computations.jl", "test/adapters.jl", "test/groups.jl", "test/reconstruction.jl",
         "test/reorder.jl")

CASES = [record for record in load_cases("composition_cases.json") if record["file"] in FILES]

#: Records that cannot run here, and why (checked by the test: each must still be a record of the file).
JULIA_WRAPPER_BRIEF = "asserts the brief() text of Julia's NamedArray/PermutedDimsArray/transpose/adjoint wrapper " \
    "chain (no numpy counterpart: the wrappers map to the array itself or its .T view, which brief() does not name)"
LAZY_SPARSE_TRANSPOSE = "a lazy transpose of a sparse matrix (Julia's transpose/adjoint/PermutedDimsArray wrapper): " \
    "pydaf.sparse.transpose builds a new CSC matrix instead"


#: Per-record reasons registered by the topic modules (``composition_<topic>.py``): ``SKIPS[id] = reason``.
SKIPS: dict[str, str] = {}

#: Per-topic skip rules registered by the topic modules: each returns a reason or ``None``.
SKIP_RULES: list[Callable[[dict, str], str | None]] = []


def skip_reason(record: dict, backend: str) -> str | None:
    """Why a record does not run on a backend, or ``None``."""
    if record["id"] in SKIPS:
        return SKIPS[record["id"]]
    for rule in SKIP_RULES:
        reason = rule(record, backend)
        if reason is not None:
            return reason
    if record.get("julia_specific") and record["call"]["op"] == "brief":
        return JULIA_WRAPPER_BRIEF
    if backend != "memory" and _names_memory_daf(record):
        return "the expected text names the MemoryDaf type"
    if backend != "memory" and record["call"]["op"] == "complete_path" and record["expected_type"] == "nothing":
        return "asserts that a MemoryDaf has no path (the H5df of the mapped run has one)"
    return None


def _names_memory_daf(record: dict) -> bool:
    expected = record.get("expected")
    return isinstance(expected, str) and "MemoryDaf" in expected


class Session:
    """The variables of one record, and the backend its ``new_memory_daf`` makes."""

    def __init__(self, backend: str, directory: Path | None) -> None:
        self.backend = backend
        self.directory = directory
        self.variables: dict[str, Any] = {}
        self._paths = itertools.count()
        self.rng = np.random.default_rng(20260611)

    def new_daf(self, name: str | None) -> pydaf.DafWriter:
        if self.backend == "memory":
            return pydaf.MemoryDaf(name=name or "memory")
        assert self.directory is not None
        path = self.directory / f"daf{next(self._paths)}.h5df"
        return pydaf.H5df(path, "w", name=name or "memory")

    def path(self, text: str) -> str:
        assert text.startswith("<tmpdir>"), text
        return str(self.directory) + text[len("<tmpdir>"):]

    def daf(self, spec: Any) -> Any:
        """A data set argument: a variable name or an inline op."""
        if isinstance(spec, dict):
            return self.run(spec)
        return self.variables[spec]

    def run(self, op: dict) -> Any:
        handler = OPS.get(op["op"])
        if handler is None:
            raise NotImplementedError(f"no handler for the op: {op['op']}")
        return handler(self, op)

    def run_setup(self, record: dict) -> None:
        for op in record["setup_ops"]:
            if op.get("expect_error"):
                try:
                    self.run(op)
                except (pydaf.DafError, *ERROR_TYPES.values()):
                    continue
                raise AssertionError(f"the setup op was expected to fail: {op}")
            result = self.run(op)
            if "var" in op and op["op"] not in _ACTS_ON_VAR:
                self.variables[op["var"]] = result
            if "assert" in op:
                self.check_assert(op, result)

    def check_assert(self, op: dict, result: Any) -> None:
        """A setup ``@assert``: equal to a value (an array literal too), or to the result of another call."""
        spec = op["assert"]
        expected = self.run(spec["equals_result_of"]) if "equals_result_of" in spec else spec["equals"]
        if isinstance(expected, dict) and "values" in expected:
            expected = self.array(expected)
        if isinstance(expected, bool | int | float | str) or expected is None:
            assert julia_equal(result, expected), (op, result)
        elif isinstance(expected, set | frozenset):
            assert set(result) == expected, (op, result)
        else:  # (arrays, pandas results: Julia's == compares the values)
            assert np.array_equal(np.asarray(plain(result)), np.asarray(plain(expected))), (op, result)

    # Values (COMPOSITION.md §5.2).

    def value(self, spec: Any) -> Any:
        if isinstance(spec, list):
            return [self.value(item) for item in spec]
        if not isinstance(spec, dict):
            return CONSTANTS.get(spec, spec) if isinstance(spec, str) else spec
        if "ref" in spec:
            return self.variables[spec["ref"]]
        if "op" in spec:
            return self.run(spec)
        if spec.get("julia") == "undef":
            return pydaf.Undef
        if "set" in spec:
            return set(spec["set"])
        if "call" in spec:
            return ARRAY_CALLS[spec["call"]](*[self.value(argument) for argument in spec["args"]])
        if "random" in spec:
            return self._random(spec)
        if "fill" in spec:
            return np.full(spec["shape"], spec["fill"], dtype=julia_dtype(spec["eltype"]), order="F")
        if "values" in spec:
            return self.array(spec)
        if "value" in spec and "eltype" in spec:
            return julia_dtype(spec["eltype"]).type(spec["value"])
        raise ValueError(f"unknown value: {spec}")

    def array(self, spec: dict) -> Any:
        dtype = julia_dtype(spec["eltype"])
        values = np.array(spec["values"], dtype=dtype)
        if values.ndim == 2:
            values = np.asfortranarray(values)
        if spec.get("sparse"):
            return sparse(values)
        return values

    def _random(self, spec: dict) -> Any:
        dtype = julia_dtype(spec["eltype"])
        values = self.rng.random(tuple(spec["shape"])).astype(dtype)
        if spec.get("sparse"):
            values[self.rng.random(values.shape) > spec.get("density", 0.5)] = 0
            return sparse(np.asfortranarray(values))
        return np.asfortranarray(values)


_ACTS_ON_VAR = {"add_axis", "set_scalar", "set_vector", "set_matrix", "delete_scalar", "delete_axis",
                "delete_vector", "delete_matrix"}


def sparse(values: np.ndarray) -> Any:
    """Julia's ``sparse`` of a dense array: a :class:`pydaf.SparseVector` or :class:`pydaf.SparseMatrixCSC` with
    ``Int64`` indices."""
    if values.ndim == 1:
        return pydaf.SparseVector.from_dense(values)
    return pydaf.SparseMatrixCSC.from_scipy(sp.csc_matrix(values))


def _read_only_wrapper(array: Any) -> Any:
    return pydaf.read_only_array(array)


def _lazy_transpose(array: Any, dims: Any = (2, 1)) -> Any:
    """Julia's transpose/adjoint (of real numbers) and ``PermutedDimsArray``: numpy's ``.T``, a view that keeps the
    parent's writability as Julia's wrappers keep its mutability."""
    if isinstance(array, pydaf.SparseMatrixCSC | pydaf.SparseVector):
        pytest.skip(LAZY_SPARSE_TRANSPOSE)
    return array if list(dims) == [1, 2] else np.asarray(array).T


ARRAY_CALLS: dict[str, Callable[..., Any]] = {
    "NamedArray": lambda array: array,  # (Julia's == compares a NamedArray by its values; pydaf has no names on arrays)
    "PermutedDimsArray": _lazy_transpose,
    "transpose": _lazy_transpose,
    "adjoint": _lazy_transpose,
    "SparseArrays.ReadOnly": _read_only_wrapper,
    "read_only_array": lambda array: pydaf.read_only_array(array),
    "copy_array": lambda array: pydaf.copy_array(array),
    "SparseVector": lambda array: sparse(np.asarray(array)),
    "SparseMatrixCSC": lambda array: sparse(np.asarray(array)),
}

CONSTANTS: dict[str, Any] = {}


def _constants() -> None:
    # Resolved lazily: the names only exist once views and concatenation are implemented.
    for name in ("ALL_SCALARS", "ALL_AXES", "ALL_VECTORS", "ALL_MATRICES"):
        if hasattr(pydaf, name):
            CONSTANTS[name] = getattr(pydaf, name)
    if hasattr(pydaf, "MergeAction"):
        for action in pydaf.MergeAction:
            CONSTANTS[action.name] = action


_constants()


def _pairs(session: Session, spec: Any) -> Any:
    """A Julia pair list / NamedTuple / Dict (a list of ``[key, value]``) as a list of ``(key, value)`` tuples, keys
    that are lists becoming tuples (Julia's tuple keys)."""
    if spec is None:
        return None
    pairs = []
    for key, value in spec:
        key = session.value(key)
        if isinstance(key, list):
            key = tuple(key)
        pairs.append((key, session.value(value)))
    return pairs


def _kwargs(session: Session, op: dict, *, pairs: tuple[str, ...] = (), dafs: tuple[str, ...] = ()) -> dict:
    kwargs = {}
    for key, value in (op.get("kwargs") or {}).items():
        if key in dafs:
            kwargs[key] = session.daf(value)
        elif key in pairs:
            kwargs[key] = _pairs(session, value)
        elif key in ("type", "eltype"):
            kwargs[key] = value
        else:
            kwargs[key] = session.value(value)
    return kwargs


# Ops.

OPS: dict[str, Callable[[Session, dict], Any]] = {}


def op(*names: str) -> Callable:
    def register(function: Callable) -> Callable:
        for name in names:
            OPS[name] = function
        return function

    return register


@op("new_memory_daf")
def _new_memory_daf(session: Session, spec: dict) -> Any:
    return session.new_daf(spec["name"])


@op("new_files_daf")
def _new_files_daf(session: Session, spec: dict) -> Any:
    return pydaf.FilesDaf(session.path(spec["path"]), spec["mode"], name=spec.get("name"))


@op("new_h5df")
def _new_h5df(session: Session, spec: dict) -> Any:
    return pydaf.H5df(session.path(spec["path"]), spec["mode"], name=spec.get("name"))


@op("mktempdir")
def _mktempdir(session: Session, spec: dict) -> Any:
    return str(session.directory)


@op("daf_list")
def _daf_list(session: Session, spec: dict) -> Any:
    return [session.daf(name) for name in spec["dafs"]]


@op("let")
def _let(session: Session, spec: dict) -> Any:
    return session.value(spec["value"])


@op("ref")
def _ref(session: Session, spec: dict) -> Any:
    return session.variables[spec["var"]]


@op("index")
def _index(session: Session, spec: dict) -> Any:
    return session.value(spec["value"])[spec["key"]]


@op("add_axis")
def _add_axis(session: Session, spec: dict) -> Any:
    entries = session.value(spec["entries"]) if isinstance(spec["entries"], dict) else spec["entries"]  # ({"ref"})
    return session.daf(spec["var"]).add_axis(spec["axis"], list(entries), **_kwargs(session, spec)) and None


@op("set_scalar")
def _set_scalar(session: Session, spec: dict) -> Any:
    value = spec["value"]
    value = session.value(value) if spec.get("eltype") is None else julia_dtype(spec["eltype"]).type(value) \
        if julia_dtype(spec["eltype"]).kind != "O" else value
    session.daf(spec["var"]).set_scalar(spec["name"], value, **_kwargs(session, spec))


@op("set_vector")
def _set_vector(session: Session, spec: dict) -> Any:
    if spec.get("eltype") is None:
        values = session.value(spec["values"])
    else:
        values = session.array({"values": spec["values"], "eltype": spec["eltype"], "sparse": spec.get("sparse")})
    session.daf(spec["var"]).set_vector(spec["axis"], spec["name"], values, **_kwargs(session, spec))


@op("set_matrix")
def _set_matrix(session: Session, spec: dict) -> Any:
    if spec.get("random"):
        values = session.value({"random": True, "eltype": spec["eltype"], "shape": spec["shape"]})
    elif spec.get("eltype") is None:
        values = session.value(spec["values"])
    else:
        values = session.array({"values": spec["values"], "eltype": spec["eltype"], "sparse": spec.get("sparse")})
    session.daf(spec["var"]).set_matrix(spec["rows_axis"], spec["columns_axis"], spec["name"], values,
                                        **_kwargs(session, spec))


@op("delete_scalar")
def _delete_scalar(session: Session, spec: dict) -> Any:
    session.daf(spec["var"]).delete_scalar(spec["name"], **_kwargs(session, spec))


@op("delete_axis")
def _delete_axis(session: Session, spec: dict) -> Any:
    session.daf(spec["var"]).delete_axis(spec["axis"], **_kwargs(session, spec))


@op("delete_vector")
def _delete_vector(session: Session, spec: dict) -> Any:
    session.daf(spec["var"]).delete_vector(spec["axis"], spec["name"], **_kwargs(session, spec))


@op("delete_matrix")
def _delete_matrix(session: Session, spec: dict) -> Any:
    session.daf(spec["var"]).delete_matrix(spec["rows_axis"], spec["columns_axis"], spec["name"],
                                           **_kwargs(session, spec))


@op("relayout_matrix")
def _relayout_matrix(session: Session, spec: dict) -> Any:
    session.daf(spec["daf"]).relayout_matrix(spec["rows_axis"], spec["columns_axis"], spec["name"],
                                             **_kwargs(session, spec))


_READERS = {
    "has_scalar": ("name",), "get_scalar": ("name",), "scalars_set": (), "has_axis": ("axis",), "axes_set": (),
    "axis_vector": ("axis",), "axis_dict": ("axis",), "axis_length": ("axis",), "axis_entries": ("axis",),
    "axis_indices": ("axis", "entries"), "has_vector": ("axis", "name"), "vectors_set": ("axis",),
    "get_vector": ("axis", "name"), "has_matrix": ("rows_axis", "columns_axis", "name"),
    "matrices_set": ("rows_axis", "columns_axis"), "get_matrix": ("rows_axis", "columns_axis", "name"),
    "axis_version_counter": ("axis",), "vector_version_counter": ("axis", "name"),
    "matrix_version_counter": ("rows_axis", "columns_axis", "name"), "complete_path": (), "empty_cache": (),
    "description": (),
}


# Julia's get_vector/get_matrix return the stored array (sparse stays sparse): pydaf's get_stored_*.
_METHODS = {"get_vector": "get_stored_vector", "get_matrix": "get_stored_matrix"}


def _reader(name: str, parameters: tuple[str, ...]) -> Callable[[Session, dict], Any]:
    def read(session: Session, spec: dict) -> Any:
        daf = session.daf(spec["daf"])
        method = getattr(daf, _METHODS.get(name, name))
        return method(*[spec[parameter] for parameter in parameters], **_kwargs(session, spec))

    return read


for _name, _parameters in _READERS.items():
    OPS[_name] = _reader(_name, _parameters)


@op("get_query")
def _get_query(session: Session, spec: dict) -> Any:
    return session.daf(spec["daf"]).get_query(spec["query_string"], **_kwargs(session, spec))


@op("read_only")
def _read_only(session: Session, spec: dict) -> Any:
    return pydaf.read_only(session.daf(spec["daf"]), **_kwargs(session, spec))


@op("chain_reader", "chain_writer")
def _chain(session: Session, spec: dict) -> Any:
    function = getattr(pydaf, spec["op"])
    return function([session.daf(daf) for daf in spec["dafs"]], **_kwargs(session, spec))


@op("viewer")
def _viewer(session: Session, spec: dict) -> Any:
    return pydaf.viewer(session.daf(spec["daf"]), **_kwargs(session, spec, pairs=("axes", "data")))


@op("brief")
def _brief(session: Session, spec: dict) -> Any:
    return pydaf.brief(session.value(spec["value"]))


@op("is_read_only_array")
def _is_read_only_array(session: Session, spec: dict) -> Any:
    return pydaf.is_read_only_array(session.value(spec["array"]))


@op("read_only_array", "copy_array")
def _array_function(session: Session, spec: dict) -> Any:
    return getattr(pydaf, spec["op"])(session.value(spec["array"]))


@op("pairs_as_dict")
def _pairs_as_dict(session: Session, spec: dict) -> Any:
    return pydaf.pairs_as_dict(_pairs(session, spec["pairs_input"]))


def _builder(kind: str) -> Callable[[Session, dict], Any]:
    def build(session: Session, spec: dict) -> Any:
        daf = session.daf(spec["daf"])
        fill = spec["fill"]
        source = session.value(fill["fills_with"])
        axes = [spec["axis"]] if "axis" in spec else [spec["rows_axis"], spec["columns_axis"]]
        arguments = [*axes, spec["name"], spec["eltype"]]
        if kind.startswith("sparse"):
            arguments += [spec["nnz"], spec["indtype"]]
        with getattr(daf, f"empty_{kind}")(*arguments, **_kwargs(session, spec)) as buffers:
            if kind == "dense_vector" or kind == "dense_matrix":
                buffers[...] = source
            elif kind == "sparse_vector":
                buffers[0][...], buffers[1][...] = source.nzind, source.nzval
            else:
                for buffer, values in zip(buffers, (source.colptr, source.rowval, source.nzval), strict=True):
                    buffer[...] = values
        return session.value(fill["returns"])

    return build


for _kind in ("dense_vector", "sparse_vector", "dense_matrix", "sparse_matrix"):
    OPS[f"empty_{_kind}"] = _builder(_kind)

_COPY_DAFS = ("source", "destination")


@op("copy_scalar", "copy_axis", "copy_vector", "copy_matrix", "copy_tensor", "copy_all")
def _copy(session: Session, spec: dict) -> Any:
    pairs = ("empty", "types") if spec["op"] == "copy_all" else ()
    kwargs = _kwargs(session, spec, pairs=pairs, dafs=_COPY_DAFS)
    return getattr(pydaf, spec["op"])(**kwargs)


@op("concatenate")
def _concatenate(session: Session, spec: dict) -> Any:
    kwargs = _kwargs(session, spec, pairs=("empty", "merge"))
    return pydaf.concatenate(session.daf(spec["destination"]), spec["axis"], session.daf(spec["sources"]), **kwargs)


# Expectations (COMPOSITION.md §4).


def plain(result: Any) -> Any:
    """A pydaf result as plain numpy (pandas unwrapped, sparse densified) for comparing values."""
    if isinstance(result, pd.Series | pd.DataFrame):
        if isinstance(result, pd.DataFrame) and hasattr(result, "sparse") and all(
                isinstance(dtype, pd.SparseDtype) for dtype in result.dtypes) and len(result.columns):
            result = result.sparse.to_dense()
        return result.to_numpy()
    if isinstance(result, pydaf.SparseMatrixCSC | pydaf.SparseVector):
        return result.to_dense()
    if sp.issparse(result):
        return result.toarray()
    return result


def assert_expected(result: Any, record: dict, session: Session) -> None:
    kind, expected = record["expected_type"], record["expected"]
    what = f"{record['id']} ({record['julia_test']})"
    if kind == "scalar":
        assert julia_equal(result, expected), f"{what}: {result!r} != {expected!r}"
    elif kind == "bool":
        assert isinstance(result, bool | np.bool_) and bool(result) == expected, f"{what}: {result!r}"
    elif kind == "nothing":
        assert result is None or isinstance(result, pydaf.DafReader), f"{what}: {result!r} is not nothing"
    elif kind == "names":
        assert isinstance(result, set | frozenset) and sorted(result) == expected, f"{what}: {result!r}"
    elif kind == "vector":
        values = plain(result)
        if record["call"]["op"] == "axis_indices":
            values = np.asarray(values) + 1
        assert len(values) == len(expected["values"]) and all(
            julia_equal(value.item() if isinstance(value, np.generic) else value, want)
            for value, want in zip(values, expected["values"], strict=True)), f"{what}: {list(values)!r}"
    elif kind == "matrix":
        values = np.asarray(plain(result))
        assert list(values.shape) == expected["shape"], f"{what}: shape {values.shape}"
        for row, expected_row in zip(values, expected["values"], strict=True):
            assert all(julia_equal(value.item() if isinstance(value, np.generic) else value, want)
                       for value, want in zip(row, expected_row, strict=True)), f"{what}: {values.tolist()!r}"
    elif kind == "text":
        assert result == expected, f"{what}:\n{result}\n--- differs from Julia's:\n{expected}"
    elif kind == "eltype":
        assert pydaf.storage_types.julia_name(_dtype(result)) == expected, f"{what}: {_dtype(result)}"
    elif kind == "isa":
        assert isinstance(result, np.generic | str) and pydaf.storage_types.julia_name(
            np.asarray(result).dtype if not isinstance(result, str) else np.dtype(object)) == expected, \
            f"{what}: {result!r}"
    elif kind == "nnz":
        assert _nnz(result) == expected, f"{what}: nnz {_nnz(result)}"
    elif kind == "is_sparse":
        assert _is_sparse(result) == expected, f"{what}: {type(result).__name__}"
    elif kind == "all_false":
        assert not np.any(plain(result)), f"{what}"
    elif kind == "relative":
        assert result == session.variables[expected["base"]] + expected["delta"], f"{what}: {result!r}"
    elif kind == "dict":
        if record["call"]["op"] == "axis_dict":  # (Julia's positions are 1-based)
            result = {key: value + 1 for key, value in result.items()}
        assert dict(result) == {key: value for key, value in expected["pairs"]}, f"{what}: {result!r}"
    elif kind in EXPECTATIONS:
        EXPECTATIONS[kind](result, record, session)
    else:
        raise NotImplementedError(f"expected_type {kind}")


#: The exceptions of Julia's type-only ``@test_throws T`` records, by Julia's type name (registered by the topic
#: modules, e.g. ``SimulatedCrash``); also what a setup op marked ``expect_error`` may raise besides a DafError.
ERROR_TYPES: dict[str, type[BaseException]] = {}

#: Checks of further ``expected_type`` kinds, registered by the topic modules: ``check(result, record, session)``.
EXPECTATIONS: dict[str, Callable[[Any, dict, Session], None]] = {}


def _dtype(result: Any) -> np.dtype:
    if isinstance(result, pd.Series | pd.DataFrame):
        result = plain(result)
    if sp.issparse(result):
        return result.dtype
    return np.asarray(result).dtype if not hasattr(result, "dtype") else np.dtype(result.dtype)


def _is_sparse(result: Any) -> bool:
    if isinstance(result, pd.DataFrame):
        return len(result.columns) > 0 and all(isinstance(dtype, pd.SparseDtype) for dtype in result.dtypes)
    if isinstance(result, pd.Series):
        return isinstance(result.dtype, pd.SparseDtype)
    return sp.issparse(result) or isinstance(result, pydaf.SparseMatrixCSC | pydaf.SparseVector)


def _nnz(result: Any) -> int:
    if isinstance(result, pd.DataFrame):
        return int(sum(result[column].sparse.npoints for column in result.columns))
    if isinstance(result, pd.Series):
        return int(result.sparse.npoints)
    return int(result.nnz)


def run_record(record: dict, backend: str, directory: Path) -> None:
    """Run one record's setup and call on a backend, and check the call's value or error."""
    session = Session(backend, directory)
    session.run_setup(record)
    if record["kind"] == "error" and record.get("expect_error_match") == "type":
        with pytest.raises(ERROR_TYPES[record["expect_error_type"]]):
            session.run(record["call"])
        return
    if record["kind"] == "error":
        try:
            session.run(record["call"])
        except pydaf.DafError as error:
            # Julia's mutating functions end in "!", pydaf's names do not ("given to reorder_axes!").
            assert_error_message(str(error), re.sub(r"(given to \w+)!$", r"\1", record["expect_error"], flags=re.M))
            return
        raise AssertionError(f"{record['id']}: no error; Julia's was:\n{record['expect_error']}")
    result = session.run(record["call"])
    if record.get("result_keys"):  # (the test compares keys(result) of a Dict)
        result = set(result)
    if record["call"]["op"] == "get_vector" or record["call"]["op"] == "get_matrix":
        result = result  # pydaf returns numpy/scipy; values are compared
    assert_expected(result, record, session)


# The topic modules register their ops, expectations and skips here (imported last: they import this module).
from . import (  # noqa: E402
    composition_computations,  # noqa: F401
    composition_contracts,  # noqa: F401
    composition_groups,  # noqa: F401
    composition_reorder,  # noqa: F401
)
