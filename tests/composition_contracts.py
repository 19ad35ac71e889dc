"""The ops, expectations and skips of Julia's recorded cases of ``contracts.jl`` (see ``tests/composition.py``)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from pydaf.composition.contracts import (
    Contract,
    ContractExpectation,
    contract_type_text,
    contractor,
    verify_input,
    verify_output,
)

from .composition import EXPECTATIONS, OPS, Session, op, plain

# Julia's test suite runs with contracts enforced (its records assume it), so the parity run does too.
os.environ["DAF_ENFORCE_CONTRACTS"] = "true"


def _key(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


def _specification(specification: list) -> tuple:
    """``[expectation, (type,) description]`` with Julia's names: types stay Julia's names (contracts take them)."""
    return (ContractExpectation[specification[0]], *specification[1:])


def _contract_pairs(pairs: list | None) -> list | None:
    if pairs is None:
        return None
    return [(_key(key), _specification(specification)) for key, specification in pairs]


@op("Contract")
def _contract(session: Session, spec: dict) -> Any:
    kwargs = dict(spec.get("kwargs") or {})
    for field in ("axes", "data"):
        if field in kwargs:
            kwargs[field] = _contract_pairs(kwargs[field])
    return Contract(**kwargs)


@op("|>")
def _merge(session: Session, spec: dict) -> Any:
    return session.variables[spec["left"]] | session.variables[spec["right"]]


@op("contractor")
def _contractor(session: Session, spec: dict) -> Any:
    return contractor(spec["computation"], session.variables[spec["contract"]], session.daf(spec["daf"]),
                      **(spec.get("kwargs") or {}))


@op("verify_input")
def _verify_input(session: Session, spec: dict) -> Any:
    return verify_input(session.daf(spec["contract_daf"]))


@op("verify_output")
def _verify_output(session: Session, spec: dict) -> Any:
    return verify_output(session.daf(spec["contract_daf"]))


def _with_nnz_expression(build: Callable[[Session, dict], Any]) -> Callable[[Session, dict], Any]:
    """An ``empty_sparse_*`` op whose ``nnz`` is Julia's ``nnz(variable)`` (``{"expr": "nnz(umis)"}``)."""

    def run(session: Session, spec: dict) -> Any:
        nnz = spec.get("nnz")
        if isinstance(nnz, dict) and "expr" in nnz:
            match = re.fullmatch(r"nnz\((\w+)\)", nnz["expr"])
            assert match is not None, nnz
            spec = {**spec, "nnz": int(session.variables[match[1]].nnz)}
        return build(session, spec)

    return run


for _kind in ("empty_sparse_vector", "empty_sparse_matrix"):
    OPS[_kind] = _with_nnz_expression(OPS[_kind])


def _check_pairs(result: Any, record: dict, session: Session) -> None:
    """``(left |> right).axes == [key => specification, ...]``: keys, expectations, types (by Julia name) and
    descriptions."""
    pairs = getattr(result, record["result_field"]) if record.get("result_field") else result
    expected = record["expected"]
    what = f"{record['id']} ({record['julia_test']})"
    assert pairs is not None and len(pairs) == len(expected), f"{what}: {pairs!r}"
    for (key, specification), (expected_key, expected_specification) in zip(pairs, expected, strict=True):
        assert key == _key(expected_key), f"{what}: {pairs!r}"
        assert len(specification) == len(expected_specification), f"{what}: {pairs!r}"
        assert specification[0].name == expected_specification[0], f"{what}: {pairs!r}"
        assert specification[-1] == expected_specification[-1], f"{what}: {pairs!r}"
        if len(specification) == 3:
            assert contract_type_text(specification[1]) == expected_specification[1], f"{what}: {pairs!r}"


def _check_same_as_call(result: Any, record: dict, session: Session) -> None:
    """A value compared with the same call on the base data set, run in the same session (version counters)."""
    expected = session.run(record["expected_call"])
    assert result == expected, f"{record['id']} ({record['julia_test']}): {result!r} != {expected!r}"


def _check_ref(result: Any, record: dict, session: Session) -> None:
    """Equal values to the (random) array bound to a variable."""
    expected = session.variables[record["expected"]["ref"]]
    assert np.array_equal(np.asarray(plain(result)), np.asarray(plain(expected))), \
        f"{record['id']} ({record['julia_test']}): {plain(result)!r} != {plain(expected)!r}"


EXPECTATIONS["pairs"] = _check_pairs
EXPECTATIONS["same_as_call"] = _check_same_as_call
EXPECTATIONS["ref"] = _check_ref
