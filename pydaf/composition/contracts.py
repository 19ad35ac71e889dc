"""Contracts (Julia's ``Contracts``): what a computation reads from a data set and what it writes to it, enforced.

A :class:`Contract` lists the axes and the data (scalars, vectors, matrices, tensors) a computation uses, each with a
:class:`ContractExpectation` (``RequiredInput``, ``OptionalInput``, ``CreatedOutput``, ``GuaranteedOutput``,
``OptionalOutput``), the element type of the data and a description (for the generated documentation,
:func:`contract_documentation`). When contracts are enforced (the environment variable ``DAF_ENFORCE_CONTRACTS`` is
true, :func:`contracts_enforced`), :func:`contractor` wraps the data set in one that refuses access to anything the
contract does not list and tracks what is accessed; :func:`verify_input` checks the inputs before the computation and
:func:`verify_output` the outputs after it (and that every required input was used). When they are not enforced,
:func:`contractor` returns the data set itself and the verifications do nothing, so contracts cost nothing.

Example:
    >>> import os, pydaf
    >>> from pydaf.storage_types import StorageInteger
    >>> os.environ["DAF_ENFORCE_CONTRACTS"] = "true"
    >>> contract = Contract(axes=[("cell", (RequiredInput, "The cells."))],
    ...                     data=[(("cell", "age"), (RequiredInput, StorageInteger, "The age of each cell.")),
    ...                           ("total_age", (CreatedOutput, "Int64", "The sum of the ages."))])
    >>> daf = pydaf.MemoryDaf(name="cells!").add_axis("cell", ["A", "B"]).set_vector("cell", "age", [3, 5])
    >>> contract_daf = contractor("example.total", contract, daf)
    >>> verify_input(contract_daf)
    >>> _ = contract_daf.set_scalar("total_age", int(contract_daf.get_vector("cell", "age").sum()))
    >>> verify_output(contract_daf)
    >>> int(daf.get_scalar("total_age"))
    8
    >>> contract_daf.get_scalar("organism")
    Traceback (most recent call last):
    ...
    pydaf.errors.DafContractError: accessing non-contract scalar: organism
    for the computation: example.total
    on the daf data: cells!

Design and the differences from Julia: docs/contracts.md.
"""

from __future__ import annotations

import enum
import os
import types
import typing
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np

from ..abc.format import CacheGroup, FormatWriter, StoredMatrix, StoredVector
from ..core.cache import (
    AxisCacheKey,
    MatrixCacheKey,
    NamesCacheKey,
    QueryCacheKey,
    ScalarCacheKey,
    VectorCacheKey,
    is_current,
)
from ..core.names import RESERVED_VECTORS, unique_name
from ..core.readers import DafReader, DafReadOnly
from ..core.shared import StateSharingDaf
from ..core.undef import Undef
from ..core.writers import DafWriter
from ..errors import DafContractError, DafTypeError, DafValueError
from ..julia_text import julia_escape_string
from ..storage_types import (
    DTYPES_BY_NAME,
    JULIA_NAMES,
    StorageNumber,
    StorageScalar,
    julia_name,
    scalar_dtype,
    storage_dtype,
)

__all__ = [
    "DAF_ENFORCE_CONTRACTS",
    "Contract",
    "ContractDaf",
    "ContractExpectation",
    "ContractFormat",
    "ContractReader",
    "CreatedOutput",
    "GuaranteedOutput",
    "OptionalInput",
    "OptionalOutput",
    "RequiredInput",
    "contract_documentation",
    "contract_type_text",
    "contractor",
    "contracts_enforced",
    "verify_input",
    "verify_output",
]

#: The environment variable that switches contract enforcement on.
_ENVIRONMENT_VARIABLE = "DAF_ENFORCE_CONTRACTS"

# Julia's ``Base.get_bool_env`` strings.
_TRUTHY = ("t", "T", "true", "True", "TRUE", "y", "Y", "yes", "Yes", "YES", "1")
_FALSY = ("f", "F", "false", "False", "FALSE", "n", "N", "no", "No", "NO", "0")


def contracts_enforced() -> bool:
    """Whether contracts are enforced: the environment variable ``DAF_ENFORCE_CONTRACTS`` read with Julia's
    ``get_bool_env`` rules (unset or empty: ``False``; ``t``, ``true``, ``y``, ``yes``, ``1`` and their capitalized
    forms: ``True``; ``f``, ``false``, ``n``, ``no``, ``0`` and theirs: ``False``). Any other value is refused (Julia
    fails to load the package on it). Read at each call (Julia reads it once, when the package is loaded).

    Example:
        >>> import os
        >>> os.environ["DAF_ENFORCE_CONTRACTS"] = "yes"
        >>> contracts_enforced()
        True
        >>> os.environ["DAF_ENFORCE_CONTRACTS"] = "maybe"
        >>> contracts_enforced()
        Traceback (most recent call last):
        ...
        pydaf.errors.DafValueError: invalid value of the environment variable: DAF_ENFORCE_CONTRACTS
        value: 'maybe'
        (expected true: t, T, true, True, TRUE, y, Y, yes, Yes, YES, 1
        or false: f, F, false, False, FALSE, n, N, no, No, NO, 0)
        >>> os.environ["DAF_ENFORCE_CONTRACTS"] = "true"
    """
    value = os.environ.get(_ENVIRONMENT_VARIABLE, "")
    if value == "":
        return False
    if value in _TRUTHY:
        return True
    if value in _FALSY:
        return False
    raise DafValueError(f"invalid value of the environment variable: {_ENVIRONMENT_VARIABLE}\nvalue: {value!r}\n"
                        f"(expected true: {', '.join(_TRUTHY)}\nor false: {', '.join(_FALSY)})")


class _EnforceContracts:
    """Julia's ``DAF_ENFORCE_CONTRACTS``: true (``bool(DAF_ENFORCE_CONTRACTS)``) when contracts are enforced, read from
    the environment variable of the same name at each use (:func:`contracts_enforced`). Julia's is a global one may
    also assign; here, set the environment variable (``os.environ["DAF_ENFORCE_CONTRACTS"] = "true"``).

    Example:
        >>> import os
        >>> os.environ["DAF_ENFORCE_CONTRACTS"] = "false"
        >>> bool(DAF_ENFORCE_CONTRACTS), DAF_ENFORCE_CONTRACTS
        (False, DAF_ENFORCE_CONTRACTS=false)
        >>> os.environ["DAF_ENFORCE_CONTRACTS"] = "true"
        >>> "enforced" if DAF_ENFORCE_CONTRACTS else "not enforced"
        'enforced'
    """

    __slots__ = ()

    #: The name of the environment variable.
    name = _ENVIRONMENT_VARIABLE

    def __bool__(self) -> bool:
        return contracts_enforced()

    def __repr__(self) -> str:
        return f"{_ENVIRONMENT_VARIABLE}={'true' if contracts_enforced() else 'false'}"


#: Whether contracts are enforced (Julia's ``DAF_ENFORCE_CONTRACTS``): use it as a boolean; it reads the environment
#: variable ``DAF_ENFORCE_CONTRACTS`` each time.
DAF_ENFORCE_CONTRACTS = _EnforceContracts()


class ContractExpectation(enum.Enum):
    """The expectation from a property (or an axis) of a computation's data set (Julia's ``ContractExpectation``).

    Inputs: ``RequiredInput`` must exist when the computation is invoked, and is used; ``OptionalInput`` is used if it
    exists. Outputs: ``CreatedOutput`` is always created by the computation (it must not exist before, unless
    ``overwrite``); ``GuaranteedOutput`` is created unless it already exists; ``OptionalOutput`` may be created,
    depending on the parameters, the optional inputs or the data.

    Example:
        >>> str(ContractExpectation.RequiredInput), ContractExpectation["OptionalOutput"] is OptionalOutput
        ('RequiredInput', True)
    """

    RequiredInput = 0
    OptionalInput = 1
    CreatedOutput = 2
    GuaranteedOutput = 3
    OptionalOutput = 4

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:  # (as Julia shows it; also the module-level name)
        return self.name


RequiredInput = ContractExpectation.RequiredInput
OptionalInput = ContractExpectation.OptionalInput
CreatedOutput = ContractExpectation.CreatedOutput
GuaranteedOutput = ContractExpectation.GuaranteedOutput
OptionalOutput = ContractExpectation.OptionalOutput

_INPUTS = (RequiredInput, OptionalInput)
_OUTPUTS = (CreatedOutput, GuaranteedOutput, OptionalOutput)

# Types.
#
# A contract's type is what Julia's is: a concrete element type or a union/abstract type of them. It is given as a
# numpy dtype or scalar type, ``str``, a tuple of them (pydaf.storage_types' ``StorageInteger`` etc.), or a Julia type
# name (``"Int64"``, ``"StorageFloat"``, ``"Integer"``, ``"Union{UInt8, UInt16}"``). It is compared as the set of what
# it admits: Julia names of the concrete element types, plus a marker per abstract Julia type (``Integer`` also admits
# types Daf doesn't store, so ``Integer`` is not a subtype of ``StorageInteger``, as in Julia).

ContractType: TypeAlias = Any

_NUMBER_NAMES = tuple(JULIA_NAMES.values())
_SIGNED = ("Int8", "Int16", "Int32", "Int64")
_UNSIGNED = ("UInt8", "UInt16", "UInt32", "UInt64")
_FLOATS = ("Float32", "Float64")
_CONCRETE = (*_NUMBER_NAMES, "String")

_ABSTRACT_CHILDREN: dict[str, tuple[str, ...]] = {
    "Any": ("Number", "AbstractString"),
    "Number": ("Real",),
    "Real": ("Integer", "AbstractFloat"),
    "Integer": ("Bool", "Signed", "Unsigned"),
    "Signed": _SIGNED,
    "Unsigned": _UNSIGNED,
    "AbstractFloat": _FLOATS,
    "AbstractString": ("String",),
}


def _abstract_atoms(name: str) -> frozenset[str]:
    atoms = {f"<{name}>"}
    for child in _ABSTRACT_CHILDREN[name]:
        atoms |= _abstract_atoms(child) if child in _ABSTRACT_CHILDREN else {child}
    return frozenset(atoms)


#: Julia's storage type unions (``StorageTypes``).
_STORAGE_UNIONS: dict[str, frozenset[str]] = {
    "StorageSigned": frozenset(_SIGNED),
    "StorageUnsigned": frozenset(_UNSIGNED),
    "StorageInteger": frozenset(_SIGNED + _UNSIGNED),
    "StorageFloat": frozenset(_FLOATS),
    "StorageReal": frozenset(_NUMBER_NAMES),
    "StorageScalar": frozenset(_NUMBER_NAMES) | _abstract_atoms("AbstractString"),
}
_STORAGE_UNIONS["StorageScalarBase"] = _STORAGE_UNIONS["StorageScalar"]

#: The atoms of every Julia type name a contract accepts, in the order names are preferred when showing a type.
_NAMED_TYPES: dict[str, frozenset[str]] = {name: frozenset({name}) for name in _CONCRETE}
_NAMED_TYPES.update(_STORAGE_UNIONS)
_NAMED_TYPES.update({name: _abstract_atoms(name) for name in _ABSTRACT_CHILDREN})

# How Julia shows a union: its abstract members (the broadest first, as it simplifies a union), then its concrete
# ones; sorted with the bits types (numbers) first, each group by name (Julia's ``union_sort_cmp``).
_ABSTRACT_ORDER = ("Any", "Number", "Real", "Integer", "AbstractFloat", "Signed", "Unsigned", "AbstractString")

# numpy's abstract scalar classes: the concrete storage types under them (numpy's ``integer`` excludes ``bool_``).
_NUMPY_ABSTRACT = (np.generic, np.number, np.integer, np.signedinteger, np.unsignedinteger, np.inexact, np.floating)


def _type_atoms(contract_type: ContractType) -> frozenset[str]:
    """What a contract type admits (see above); an unknown type is a :class:`~pydaf.DafTypeError`."""
    if isinstance(contract_type, str):
        text = contract_type.strip()
        if text.startswith("Union{") and text.endswith("}"):
            parts = [part for part in text[len("Union{"):-1].split(",") if part.strip()]
            if parts:
                return frozenset().union(*(_type_atoms(part) for part in parts))
        atoms = _NAMED_TYPES.get(text)
        if atoms is not None:
            return atoms
        if text in ("str", "Str", "string"):
            return _NAMED_TYPES["String"]
        if text in DTYPES_BY_NAME:
            return frozenset({julia_name(DTYPES_BY_NAME[text])})
        raise DafTypeError(f"unknown contract type: {contract_type}\n(expected an element type such as Int64, "
                           "Float32, String, a union such as StorageInteger, StorageFloat, StorageReal, "
                           "StorageScalar, Union{Int32, Int64}, or a Julia abstract type such as Integer or Real)")
    if isinstance(contract_type, tuple | list | set | frozenset):
        if not contract_type:
            raise DafTypeError("unknown contract type: () (an empty union admits nothing)")
        return frozenset().union(*(_type_atoms(part) for part in contract_type))
    if contract_type is None:  # (numpy would take it for Float64)
        raise DafTypeError("unknown contract type: None (expected an element type)")
    if contract_type is typing.Any or contract_type is object:
        return _NAMED_TYPES["Any"]
    if contract_type == StorageScalar:  # (pydaf's annotation aliases, as the Julia unions they stand for)
        return _NAMED_TYPES["StorageScalar"]
    if contract_type == StorageNumber:
        return _NAMED_TYPES["StorageReal"]
    if isinstance(contract_type, types.UnionType) or typing.get_origin(contract_type) is typing.Union:
        return frozenset().union(*(_type_atoms(part) for part in typing.get_args(contract_type)))
    if isinstance(contract_type, type) and contract_type in _NUMPY_ABSTRACT:
        return frozenset(name for dtype, name in JULIA_NAMES.items() if issubclass(dtype.type, contract_type))
    try:
        return frozenset({julia_name(storage_dtype(contract_type, what="contract type"))})
    except DafTypeError:
        raise
    except Exception as error:  # (e.g. a type numpy can't make a dtype of)
        raise DafTypeError(f"unknown contract type: {contract_type!r}") from error


def contract_type_text(contract_type: ContractType) -> str:
    """How Julia shows a contract's type (in messages and the documentation): a type's name (``Int64``, ``String``,
    ``Integer``), a union as ``Union{...}`` with Julia's order of its members (Julia's ``StorageFloat`` and the other
    storage unions are plain global variables, so Julia shows them expanded).

    Example:
        >>> import numpy as np
        >>> from pydaf.storage_types import StorageFloat
        >>> contract_type_text(np.int32), contract_type_text(str), contract_type_text(StorageFloat)
        ('Int32', 'String', 'Union{Float32, Float64}')
        >>> contract_type_text("Integer"), contract_type_text((np.uint8, np.uint16, str))
        ('Integer', 'Union{UInt16, UInt8, String}')
    """
    remaining = set(_type_atoms(contract_type))
    bits: list[str] = []
    others: list[str] = []
    for name in _ABSTRACT_ORDER:
        atoms = _NAMED_TYPES[name]
        if atoms <= remaining:
            others.append(name)
            remaining -= atoms
    for atom in remaining:
        (others if atom == "String" else bits).append(atom)
    parts = sorted(bits) + sorted(others)
    return parts[0] if len(parts) == 1 else "Union{" + ", ".join(parts) + "}"


def _admits(contract_type: ContractType, dtype: np.dtype) -> bool:
    return julia_name(dtype) in _type_atoms(contract_type)


# Keys (Julia's ``$(key)``: a tuple shown with its strings quoted).


def _key_text(key: Any) -> str:
    if isinstance(key, tuple):
        return "(" + ", ".join(f'"{julia_escape_string(str(part))}"' for part in key) + ")"
    return str(key)


def _is_axis_key(key: Any) -> bool:
    return isinstance(key, str)


def _is_data_key(key: Any) -> bool:
    return isinstance(key, str) or (isinstance(key, tuple) and 2 <= len(key) <= 4
                                    and all(isinstance(part, str) for part in key))


# Contracts.

ContractPairs: TypeAlias = Mapping[Any, Any] | Iterable[Any]


def _expectation(value: Any, item: Any, what: str) -> ContractExpectation:
    if isinstance(value, ContractExpectation):
        return value
    if isinstance(value, str) and value in ContractExpectation.__members__:
        return ContractExpectation[value]
    raise DafValueError(f"invalid {what}: {item!r}\n(expected a ContractExpectation: RequiredInput, OptionalInput, "
                        "CreatedOutput, GuaranteedOutput or OptionalOutput)")


def _contract_pairs(pairs: ContractPairs | None, what: str) -> list[tuple[Any, tuple]] | None:
    """``axes`` or ``data`` of a :class:`Contract` as a list of ``(key, specification)`` pairs: keys lists become
    tuples, specifications become tuples, expectations given by name become members, types are checked. (Which kind
    of key belongs where is checked when the contract is used, as Julia does.)"""
    if pairs is None:
        return None
    if isinstance(pairs, str):
        raise DafValueError(f"invalid contract {what}: {pairs!r}\n(expected a list of (key, specification) pairs)")
    items = list(pairs.items()) if isinstance(pairs, Mapping) else list(pairs)
    result: list[tuple[Any, tuple]] = []
    for item in items:
        if not (isinstance(item, tuple | list) and len(item) == 2):
            raise DafValueError(f"invalid contract {what} item: {item!r}\n(expected a (key, specification) pair)")
        key, specification = item
        if isinstance(key, list):
            key = tuple(key)
        if not _is_data_key(key):
            raise DafValueError(f"invalid contract key: {key!r}\n(expected an axis or scalar name, (axis, name), "
                                "(rows_axis, columns_axis, name) or (main_axis, rows_axis, columns_axis, name))")
        if not (isinstance(specification, tuple | list) and len(specification) in (2, 3)):
            raise DafValueError(f"invalid contract specification: {specification!r}\nfor the key: {_key_text(key)}\n"
                                "(expected (expectation, description) for an axis, (expectation, type, description) "
                                "for data)")
        expectation = _expectation(specification[0], specification, "contract specification")
        description = specification[-1]
        if not isinstance(description, str):
            raise DafValueError(f"invalid contract description: {description!r}\nfor the key: {_key_text(key)}")
        if len(specification) == 3:
            _type_atoms(specification[1])
            result.append((key, (expectation, specification[1], description)))
        else:
            result.append((key, (expectation, description)))
    return result


class Contract:
    """The contract of a computation (Julia's ``Contract``): the ``axes`` and the ``data`` it uses. If ``is_relaxed``,
    the computation may also use other data (typically when it takes queries as parameters). ``name``, if given, is the
    name of the parameter that holds the data set (otherwise it is the first positional parameter).

    ``axes`` is a list of ``(axis, (expectation, description))`` pairs (or a dict), ``data`` a list of ``(key,
    (expectation, type, description))`` pairs where ``key`` is a scalar name, ``(axis, name)``, ``(rows_axis,
    columns_axis, name)`` or a tensor ``(main_axis, rows_axis, columns_axis, name)`` (the matrices
    ``<entry>_<name>`` of every entry of the main axis), and ``type`` a numpy dtype or type, ``str``, a tuple of them
    (``pydaf.storage_types.StorageInteger``…) or a Julia type name (``"Int64"``, ``"StorageFloat"``). ``left | right``
    merges two contracts (Julia's ``left |> right``), for a computation that calls ``left``'s then ``right``'s.

    Example:
        >>> contract = Contract(axes=[("cell", (RequiredInput, "The cells."))],
        ...                     data=[(("cell", "age"), (OptionalInput, "Int64", "The ages."))])
        >>> contract.axes, contract.data, contract.is_relaxed
        ([('cell', (RequiredInput, 'The cells.'))], [(('cell', 'age'), (OptionalInput, 'Int64', 'The ages.'))], False)
        >>> (contract | Contract(data=[(("cell", "age"), (RequiredInput, "Int64", "The ages."))])).data
        [(('cell', 'age'), (RequiredInput, 'Int64', 'The ages.'))]
    """

    __slots__ = ("axes", "data", "is_relaxed", "name")

    def __init__(self, *, name: str | None = None, is_relaxed: bool = False, axes: ContractPairs | None = None,
                 data: ContractPairs | None = None) -> None:
        if name is not None and not isinstance(name, str):
            raise DafValueError(f"invalid contract name: {name!r} (expected a string or None)")
        self.name = name
        self.is_relaxed = bool(is_relaxed)
        self.axes = _contract_pairs(axes, "axes")
        self.data = _contract_pairs(data, "data")

    def __repr__(self) -> str:
        return f"Contract(name={self.name!r}, is_relaxed={self.is_relaxed}, axes={self.axes!r}, data={self.data!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Contract):
            return NotImplemented
        return (self.name, self.is_relaxed, self.axes, self.data) == (other.name, other.is_relaxed, other.axes,
                                                                      other.data)

    __hash__ = None  # type: ignore[assignment]  # (mutable lists inside)

    def __or__(self, right: Contract) -> Contract:
        if not isinstance(right, Contract):
            return NotImplemented
        if self.name is None:
            name = right.name
        elif right.name is None:
            name = self.name
        else:
            name = f"{self.name}_{right.name}"
        merged = Contract(name=name, is_relaxed=self.is_relaxed or right.is_relaxed)
        merged.axes = _add_pairs(self.axes, right.axes)
        merged.data = _add_pairs(self.data, right.data)
        return merged


def _add_pairs(left: list[tuple[Any, tuple]] | None,
               right: list[tuple[Any, tuple]] | None) -> list[tuple[Any, tuple]] | None:
    if left is None:
        return None if right is None else list(right)
    if right is None:
        return list(left)
    merged = dict(left)
    for key, right_specification in right:
        merged[key] = _merge_specifications(key, merged.get(key), right_specification)
    return list(merged.items())


def _merge_specifications(key: Any, left: tuple | None, right: tuple) -> tuple:
    if left is None:
        return right
    if len(left) != len(right):
        raise DafContractError(f"incompatible specification: {left!r}\nand specification: {right!r}\n"
                               f"for the contracts key: {_key_text(key)}")
    if len(left) == 2:
        if left[1] != right[1]:
            raise DafContractError(f"different description for the axis: {_key_text(key)}")
        return (_merge_expectations("axis", key, left[0], right[0]), left[1])
    if left[2] != right[2]:
        raise DafContractError(f"different description for the data: {_key_text(key)}")
    return (_merge_expectations("data", key, left[0], right[0]), _merge_types(key, left[1], right[1]), left[2])


def _merge_types(key: Any, left: ContractType, right: ContractType) -> ContractType:
    left_atoms, right_atoms = _type_atoms(left), _type_atoms(right)
    if left_atoms <= right_atoms:
        return left
    if right_atoms <= left_atoms:
        return right
    raise DafContractError(f"incompatible type: {contract_type_text(left)}\nand type: {contract_type_text(right)}\n"
                           f"for the contracts data: {_key_text(key)}")


def _merge_expectations(what: str, key: Any, left: ContractExpectation,
                        right: ContractExpectation) -> ContractExpectation:
    if right in _INPUTS:
        if left is RequiredInput:
            return RequiredInput
        if left is OptionalInput:
            return right
        if left in (CreatedOutput, GuaranteedOutput):
            return left
        if left is OptionalOutput and right is OptionalInput:
            return OptionalOutput
    raise DafContractError(f"incompatible expectation: {left}\nand expectation: {right}\n"
                           f"for the contracts {what}: {_key_text(key)}")


# Documentation (Julia's ``contract_documentation``, text for text).


def contract_documentation(contract: Contract) -> str:
    """The Markdown description of a contract that Julia's ``contract_documentation`` writes (what ``@computation``
    puts in place of ``$(CONTRACT)`` in a docstring): ``## Inputs`` and ``## Outputs``, each with ``### Scalars``,
    ``### Axes``, ``### Vectors``, ``### Matrices`` and ``### Tensors`` sections listing the properties, their types,
    expectations and descriptions. As Julia's, it lists ``GuaranteedOutput`` data under neither.

    Example:
        >>> print(contract_documentation(Contract(
        ...     axes=[("cell", (RequiredInput, "The cells."))],
        ...     data=[(("cell", "age"), (RequiredInput, "StorageFloat", "The age of each cell.")),
        ...           ("total_age", (CreatedOutput, "Int64", "The sum of the ages."))])), end="")
        ## Inputs
        <BLANKLINE>
        ### Axes
        <BLANKLINE>
        **cell** (required): The cells.
        <BLANKLINE>
        ### Vectors
        <BLANKLINE>
        **cell @ age**::Union{Float32, Float64} (required): The age of each cell.
        <BLANKLINE>
        ## Outputs
        <BLANKLINE>
        ### Scalars
        <BLANKLINE>
        **total_age**::Int64 (created): The sum of the ages.
    """
    _require_keys(contract, None)
    lines: list[str] = []
    has_inputs = False
    for section in _SECTIONS:
        has_inputs = section(contract, lines, is_for_output=False, has_any=has_inputs)
    if contract.is_relaxed:
        _direction_header(lines, is_for_output=False, has_any=has_inputs)
        lines += ["", "Additional inputs may be used depending on the parameter(s)."]
    has_outputs = False
    for section in _SECTIONS:
        has_outputs = section(contract, lines, is_for_output=True, has_any=has_outputs)
    if contract.is_relaxed:
        # (Julia passes has_inputs here: kept, so the text is the same)
        _direction_header(lines, is_for_output=True, has_any=has_inputs)
        lines += ["", "Additional outputs may be created depending on the parameter(s)."]
    return "".join(f"{line}\n" for line in lines)


def _documented(expectation: ContractExpectation, is_for_output: bool) -> bool:
    return expectation in ((CreatedOutput, OptionalOutput) if is_for_output else _INPUTS)


def _short(expectation: ContractExpectation) -> str:
    return {RequiredInput: "required", CreatedOutput: "created", GuaranteedOutput: "guaranteed"}.get(expectation,
                                                                                                      "optional")


def _direction_header(lines: list[str], *, is_for_output: bool, has_any: bool) -> bool:
    if not has_any:
        lines.extend(["", "## Outputs"] if is_for_output else ["## Inputs"])
    return True


def _section(title: str, pairs: Callable[[Contract], list[tuple[Any, tuple]] | None],
             matches: Callable[[Any], bool], label: Callable[[Any, tuple], str]) -> Callable[..., bool]:
    def document(contract: Contract, lines: list[str], *, is_for_output: bool, has_any: bool) -> bool:
        is_first = True
        for key, specification in pairs(contract) or []:
            if matches(key) and _documented(specification[0], is_for_output):
                has_any = _direction_header(lines, is_for_output=is_for_output, has_any=has_any)
                if is_first:
                    is_first = False
                    lines.extend(["", f"### {title}"])
                lines.extend(["", f"{label(key, specification)} ({_short(specification[0])}): "
                                  f"{_dedent(specification[-1])}"])
        return has_any

    return document


def _typed(text: str, specification: tuple) -> str:
    return f"**{text}**::{contract_type_text(specification[1])}"


_SECTIONS = (
    _section("Scalars", lambda contract: contract.data, lambda key: isinstance(key, str),
             lambda key, specification: _typed(key, specification)),
    _section("Axes", lambda contract: contract.axes, lambda key: True, lambda key, specification: f"**{key}**"),
    _section("Vectors", lambda contract: contract.data, lambda key: isinstance(key, tuple) and len(key) == 2,
             lambda key, specification: _typed(f"{key[0]} @ {key[1]}", specification)),
    _section("Matrices", lambda contract: contract.data, lambda key: isinstance(key, tuple) and len(key) == 3,
             lambda key, specification: _typed(f"{key[0]}, {key[1]} @ {key[2]}", specification)),
    _section("Tensors", lambda contract: contract.data, lambda key: isinstance(key, tuple) and len(key) == 4,
             lambda key, specification: _typed(f"{key[0]}; {key[1]}, {key[2]} @ {key[3]}", specification)),
)


def _dedent(text: str, indent: str = "") -> str:
    """Julia's ``dedent`` of Contracts: drop leading and trailing empty lines and the spaces every line starts with."""
    lines = text.split("\n")
    while lines and not lines[0]:
        lines = lines[1:]
    while lines and not lines[-1]:
        lines = lines[:-1]
    first_non_space: int | None = None
    for line in lines:
        line_non_space = next((index for index, character in enumerate(line) if character != " "), None)
        if first_non_space is None or (line_non_space is not None and line_non_space < first_non_space):
            first_non_space = line_non_space
    if first_non_space is None:
        return indent + text
    return "\n".join(indent + line[first_non_space:] for line in lines)


def _require_keys(contract: Contract, name: str | None) -> None:
    """Julia's checks (its ``@assert``\\ s) that axes are named by axis keys and data by data keys (``name``: the
    contract's data set, if any)."""
    trailer = "" if name is None else f"\nfor the daf data: {name}"
    for key, specification in contract.axes or []:
        if not _is_axis_key(key):
            raise DafContractError(f"invalid AxisKey: {_key_text(key)}{trailer}")
        if len(specification) != 2:
            raise DafContractError(f"invalid AxisSpecification: {specification!r}{trailer}")
    for _key, specification in contract.data or []:
        if len(specification) != 3:
            raise DafContractError(f"invalid DataSpecification: {specification!r}{trailer}")


# Enforcement.


@dataclass
class _Tracker:
    """What the contract says of an axis or a property, and whether the computation accessed it."""

    expectation: ContractExpectation
    type: ContractType = None
    accessed: bool = False
    main_axis: str | None = None


class _Tracking:
    """The state of one contract's enforcement on one data set, shared by the :class:`ContractDaf` and its read-only
    form: the trackers of the axes and the data, and the checks of each access."""

    def __init__(self, computation: str, contract: Contract, daf: DafReader, name: str, overwrite: bool) -> None:
        self.computation = computation
        self.is_relaxed = contract.is_relaxed
        self.daf = daf
        self.overwrite = overwrite
        _require_keys(contract, name)
        self.axes: dict[str, _Tracker] = {axis: _Tracker(specification[0])
                                          for axis, specification in contract.axes or []}
        self.data: dict[Any, _Tracker] = {}
        for key, (expectation, contract_type, _) in contract.data or []:
            self.data[key] = _Tracker(expectation, contract_type)
            self._ensure_axes(key, expectation, name)
        self._expand_input_tensors()

    # Building.

    def _ensure_axes(self, key: Any, expectation: ContractExpectation, name: str) -> None:
        if isinstance(key, str):
            return
        if len(key) == 2:
            uses = [(key[0], f"for the {expectation} vector: {key[1]}")]
        elif len(key) == 3:
            uses = [(key[0], f"for the rows of the {expectation} matrix: {key[2]}\nwith the columns axis: {key[1]}"),
                    (key[1], f"for the columns of the {expectation} matrix: {key[2]}\nwith the rows axis: {key[0]}")]
        else:
            uses = [(key[0], f"for the main of the {expectation} tensor: {key[3]}\nwith the rows axis: {key[1]}\n"
                             f"and the columns axis: {key[2]}"),
                    (key[1], f"for the rows of the {expectation} tensor: {key[3]}\nwith the main axis: {key[0]}\n"
                             f"and the columns axis: {key[2]}"),
                    (key[2], f"for the columns of the {expectation} tensor: {key[3]}\nwith the main axis: {key[0]}\n"
                             f"and the rows axis: {key[1]}")]
        for axis, what_for in uses:
            tracker = self.axes.get(axis)
            if tracker is None:
                raise DafContractError(f"non-contract axis: {axis}\n{what_for}\nfor the computation: "
                                       f"{self.computation}", daf_name=name, daf_preposition="on")
            if not _is_compatible_axis_expectation(expectation, tracker.expectation):
                raise DafContractError(f"incompatible {tracker.expectation} axis: {axis}\n{what_for}\nfor the "
                                       f"computation: {self.computation}", daf_name=name, daf_preposition="on")

    def _expand_input_tensors(self) -> None:
        tensors = [(key, tracker) for key, tracker in self.data.items()
                   if isinstance(key, tuple) and len(key) == 4 and self.daf.has_axis(key[0])]
        for key, tracker in tensors:
            main_axis, rows_axis, columns_axis, name = key
            tracker.main_axis = main_axis
            for entry in self.daf.axis_vector(main_axis).tolist():
                self.data[(rows_axis, columns_axis, f"{entry}_{name}")] = tracker
            del self.data[key]

    def expand_axis_tensors(self, axis: str, entries: np.ndarray) -> None:
        """Once an axis is added, the tensors that use it and whose axes now all exist become their matrices."""
        tensors = [(key, tracker) for key, tracker in self.data.items()
                   if isinstance(key, tuple) and len(key) == 4 and axis in key[:3]
                   and all(self.daf.has_axis(tensor_axis) for tensor_axis in key[:3])]
        for key, tracker in tensors:
            main_axis, rows_axis, columns_axis, name = key
            main_entries = entries if main_axis == axis else self.daf.axis_vector(main_axis)
            for entry in np.asarray(main_entries).tolist():
                self.data[(rows_axis, columns_axis, f"{entry}_{name}")] = tracker
            del self.data[key]

    # Messages.

    def error(self, problem: str, *, of: bool = False) -> DafContractError:
        return DafContractError(f"{problem}\n{'of' if of else 'for'} the computation: {self.computation}",
                                daf_name=self.daf.name, daf_preposition="on")

    def inner(self) -> _Tracking | None:
        """The tracking of the data set this one wraps, when it is itself a contract's data set."""
        return self.daf._tracking if isinstance(self.daf, _ContractAccess) else None

    # Access.

    def access_scalar(self, name: str, *, is_for_modify: bool) -> None:
        inner = self.inner()
        if inner is not None:
            inner.access_scalar(name, is_for_modify=is_for_modify)
        self._note_access(self.data.get(name), f"scalar: {name}", is_for_modify=is_for_modify)

    def access_axis(self, axis: str, *, is_for_modify: bool) -> None:
        inner = self.inner()
        if inner is not None:
            inner.access_axis(axis, is_for_modify=is_for_modify)
        self._note_access(self.axes.get(axis), f"axis: {axis}", is_for_modify=is_for_modify)

    def access_vector(self, axis: str, name: str, *, is_for_modify: bool) -> None:
        inner = self.inner()
        if inner is not None:
            inner.access_vector(axis, name, is_for_modify=is_for_modify)
        self.access_axis(axis, is_for_modify=False)
        self._note_access(self.data.get((axis, name)), f"vector: {name}\nof the axis: {axis}",
                          is_for_modify=is_for_modify, untracked_ok=name in RESERVED_VECTORS)

    def access_matrix(self, rows_axis: str, columns_axis: str, name: str, *, is_for_modify: bool) -> None:
        inner = self.inner()
        if inner is not None:
            inner.access_matrix(rows_axis, columns_axis, name, is_for_modify=is_for_modify)
        self.access_axis(rows_axis, is_for_modify=False)
        self.access_axis(columns_axis, is_for_modify=False)
        tracker = self.data.get((rows_axis, columns_axis, name)) or self.data.get((columns_axis, rows_axis, name))
        # (Julia's "modifying" text spells the axes rows_axis and columns_axis)
        self._note_access(tracker, f"matrix: {name}\nof the rows axis: {rows_axis}\nand the columns axis: "
                          f"{columns_axis}", is_for_modify=is_for_modify, modified=f"matrix: {name}\nof the rows_axis: "
                          f"{rows_axis}\nand the columns_axis: {columns_axis}")
        if tracker is not None and tracker.main_axis is not None:
            self.access_axis(tracker.main_axis, is_for_modify=False)

    def _note_access(self, tracker: _Tracker | None, what: str, *, is_for_modify: bool, untracked_ok: bool = False,
                     modified: str | None = None) -> None:
        """Mark an access to a property (``what``, e.g. ``axis: cell``; ``modified`` when the "modifying" error
        shows it otherwise): not in the contract is an error unless relaxed, modifying an input is an error."""
        if tracker is None:
            if self.is_relaxed or untracked_ok:
                return
            raise self.error(f"accessing non-contract {what}")
        if is_for_modify and tracker.expectation in _INPUTS:
            raise self.error(f"modifying {tracker.expectation} {modified or what}")
        tracker.accessed = True

    def access_dependency(self, key: Hashable) -> None:
        """Track the access a cached query result made when it was computed (Julia's ``verify_contract_query``)."""
        if isinstance(key, AxisCacheKey):
            self.access_axis(key.axis, is_for_modify=False)
        elif isinstance(key, ScalarCacheKey):
            self.access_scalar(key.name, is_for_modify=False)
        elif isinstance(key, VectorCacheKey):
            self.access_vector(key.axis, key.name, is_for_modify=False)
        elif isinstance(key, MatrixCacheKey):
            self.access_matrix(key.rows_axis, key.columns_axis, key.name, is_for_modify=False)
        elif isinstance(key, NamesCacheKey):
            for axis in key.axes:
                self.access_axis(axis, is_for_modify=False)

    # Verification.

    def verify(self, *, is_for_output: bool) -> None:
        for axis, tracker in list(self.axes.items()):
            self._verify_axis_data(axis, tracker, is_for_output)
        for key, tracker in list(self.data.items()):
            if isinstance(key, str):
                self._verify_scalar_data(key, tracker, is_for_output)
            elif len(key) == 2:
                axis, name = key
                self._verify_vector_data(axis, name, tracker, is_for_output)
            elif len(key) == 3:
                rows_axis, columns_axis, name = key
                self._verify_matrix_data(rows_axis, columns_axis, name, tracker, is_for_output)
        if not is_for_output:
            return
        daf = self.daf
        for key, tracker in list(self.data.items()):
            if tracker.accessed or tracker.expectation is not RequiredInput:
                continue
            if isinstance(key, str):
                if daf.has_scalar(key):
                    raise self.error(f"unused RequiredInput scalar: {key}", of=True)
            elif len(key) == 2:
                if daf.has_axis(key[0]) and daf.has_vector(*key):
                    raise self.error(f"unused RequiredInput vector: {key[1]}\nof the axis: {key[0]}", of=True)
            elif len(key) == 3:
                if daf.has_axis(key[0]) and daf.has_axis(key[1]) and daf.has_matrix(*key):
                    raise self.error(f"unused RequiredInput matrix: {key[2]}\nof the rows axis: {key[0]}\n"
                                     f"and the columns axis: {key[1]}", of=True)
        for axis, tracker in list(self.axes.items()):
            if daf.has_axis(axis) and not tracker.accessed and tracker.expectation is RequiredInput:
                raise self.error(f"unused RequiredInput axis: {axis}", of=True)

    def _is_forbidden(self, expectation: ContractExpectation, is_for_output: bool) -> bool:
        return not is_for_output and expectation is CreatedOutput and not self.overwrite

    def _verify_axis_data(self, axis: str, tracker: _Tracker, is_for_output: bool) -> None:
        if self.daf.has_axis(axis):
            if self._is_forbidden(tracker.expectation, is_for_output):
                raise self.error(f"pre-existing {tracker.expectation} axis: {axis}")
        elif _is_mandatory(tracker.expectation, is_for_output):
            raise self.error(f"missing {_direction(is_for_output)} axis: {axis}")

    def _verify_scalar_data(self, name: str, tracker: _Tracker, is_for_output: bool) -> None:
        value: StorageScalar | None = self.daf.get_scalar(name, default=None)
        self._verify_data(None if value is None else scalar_dtype(value), tracker, is_for_output,
                          f"scalar: {name}", "type")

    def _verify_vector_data(self, axis: str, name: str, tracker: _Tracker, is_for_output: bool) -> None:
        vector = self.daf.get_stored_vector(axis, name, default=None) if self.daf.has_axis(axis) else None
        self._verify_data(None if vector is None else vector.dtype, tracker, is_for_output,
                          f"vector: {name}\nof the axis: {axis}", "element type")

    def _verify_matrix_data(self, rows_axis: str, columns_axis: str, name: str, tracker: _Tracker,
                            is_for_output: bool) -> None:
        matrix = self._stored_matrix(rows_axis, columns_axis, name)
        self._verify_data(None if matrix is None else matrix.dtype, tracker, is_for_output,
                          f"matrix: {name}\nof the rows axis: {rows_axis}\nand the columns axis: {columns_axis}",
                          "element type")

    def _verify_data(self, dtype: np.dtype | None, tracker: _Tracker, is_for_output: bool, what: str,
                     type_label: str) -> None:
        """Check one property (``what``, e.g. ``vector: age\\nof the axis: cell``; ``dtype`` None when it is absent)
        against its tracker: present when mandatory, absent when to be created, of an admitted type."""
        if dtype is None:
            if _is_mandatory(tracker.expectation, is_for_output):
                raise self.error(f"missing {_direction(is_for_output)} {what}\nwith {type_label}: "
                                 f"{contract_type_text(tracker.type)}")
            return
        if self._is_forbidden(tracker.expectation, is_for_output):
            raise self.error(f"pre-existing {tracker.expectation} {what}")
        if not _admits(tracker.type, dtype):
            raise self.error(f"unexpected type: {julia_name(dtype)}\ninstead of type: "
                             f"{contract_type_text(tracker.type)}\nfor the {_direction(is_for_output)} {what}")

    def _stored_matrix(self, rows_axis: str, columns_axis: str, name: str) -> StoredMatrix | None:
        """The matrix in whichever layout is stored (only its element type is checked: no relayout is needed)."""
        daf = self.daf
        if not (daf.has_axis(rows_axis) and daf.has_axis(columns_axis)):
            return None
        for rows, columns in ((rows_axis, columns_axis), (columns_axis, rows_axis)):
            if daf.has_matrix(rows, columns, name, relayout=False):
                return daf.get_stored_matrix(rows, columns, name, relayout=False)
        return None


def _is_compatible_axis_expectation(data_expectation: ContractExpectation,
                                    axis_expectation: ContractExpectation) -> bool:
    if data_expectation in (OptionalInput, OptionalOutput):
        return True
    if data_expectation is RequiredInput:
        return axis_expectation is RequiredInput
    # (Julia asserts data is never a GuaranteedOutput here; it is taken as a CreatedOutput)
    return axis_expectation in (RequiredInput, CreatedOutput, GuaranteedOutput)


def _is_mandatory(expectation: ContractExpectation, is_for_output: bool) -> bool:
    return expectation is (CreatedOutput if is_for_output else RequiredInput)


def _direction(is_for_output: bool) -> str:
    return "output" if is_for_output else "input"


class ContractFormat(FormatWriter):
    """The storage contract of a contract's data set: every request goes to the wrapped data set's storage; the
    changes are checked against the contract first (the reads are checked by :class:`ContractDaf`'s readers, as
    Julia's ``ContractDaf`` does, so cached data is tracked too).

    Example:
        >>> import os, pydaf
        >>> os.environ["DAF_ENFORCE_CONTRACTS"] = "true"
        >>> daf = pydaf.MemoryDaf(name="cells!")
        >>> contract_daf = contractor("example.add", Contract(axes=[("cell", (CreatedOutput, "The cells."))]), daf)
        >>> contract_daf.format.type_name, contract_daf.format.format_has_axis("cell", for_change=False)
        ('MemoryDaf', False)
        >>> contract_daf.format.format_add_axis("gene", np.array(["X"], dtype=object))
        Traceback (most recent call last):
        ...
        pydaf.errors.DafContractError: accessing non-contract axis: gene
        for the computation: example.add
        on the daf data: cells!
    """

    def __init__(self, tracking: _Tracking) -> None:
        self._tracking = tracking
        self._base = tracking.daf.format

    @property
    def type_name(self) -> str:  # type: ignore[override]
        return self._base.type_name

    @property
    def is_writable(self) -> bool:  # type: ignore[override]
        return self._base.is_writable

    @property
    def supports_rewrites(self) -> bool:  # type: ignore[override]
        return self._base.supports_rewrites

    @property
    def maps_files(self) -> bool:  # type: ignore[override]
        return self._base.maps_files

    @property
    def persistent(self) -> bool:  # type: ignore[override]
        return self._base.persistent

    @property
    def view_nesting(self) -> int:
        return getattr(self._base, "view_nesting", 0)

    def format_default_name(self) -> str:
        return self._base.format_default_name()

    def format_complete_path(self) -> str | None:
        return self._base.format_complete_path()

    def format_description_header(self, indent: str, lines: list[str], deep: bool) -> None:
        self._base.format_description_header(indent, lines, deep)

    def format_description_footer(self, indent: str, lines: list[str], *, cache: bool, deep: bool,
                                  tensors: bool) -> None:
        self._base.format_description_footer(indent, lines, cache=cache, deep=deep, tensors=tensors)

    def format_shared_state(self, state: Any) -> Any:
        return state

    def format_stores_references(self) -> bool:
        return self._base.format_stores_references()

    def format_version_counter(self, key: Hashable) -> int:
        return self._base.format_version_counter(key)

    def format_write_count(self) -> int:
        return self._base.format_write_count()

    def format_close(self) -> None:
        pass  # (the wrapped data set stays open)

    # Scalars.

    def format_has_scalar(self, name: str) -> bool:
        return self._base.format_has_scalar(name)

    def format_scalars_set(self) -> set[str]:
        return self._base.format_scalars_set()

    def format_get_scalar(self, name: str) -> StorageScalar:
        return self._base.format_get_scalar(name)

    def format_set_scalar(self, name: str, value: StorageScalar) -> None:
        self._tracking.access_scalar(name, is_for_modify=True)
        self._writer().format_set_scalar(name, value)

    def format_delete_scalar(self, name: str, *, for_set: bool) -> None:
        self._tracking.access_scalar(name, is_for_modify=True)
        self._writer().format_delete_scalar(name, for_set=for_set)

    # Axes.

    def format_has_axis(self, axis: str, *, for_change: bool) -> bool:
        if for_change:
            self._tracking.access_axis(axis, is_for_modify=True)
        return self._base.format_has_axis(axis, for_change=for_change)

    def format_axes_set(self) -> set[str]:
        return self._base.format_axes_set()

    def format_axis_vector(self, axis: str) -> tuple[np.ndarray, CacheGroup | None]:
        return self._base.format_axis_vector(axis)

    def format_axis_length(self, axis: str) -> int:
        return self._base.format_axis_length(axis)

    def format_add_axis(self, axis: str, entries: np.ndarray) -> None:
        self._tracking.access_axis(axis, is_for_modify=True)
        self._writer().format_add_axis(axis, entries)
        self._tracking.expand_axis_tensors(axis, entries)

    def format_delete_axis(self, axis: str) -> None:
        self._tracking.access_axis(axis, is_for_modify=True)
        self._writer().format_delete_axis(axis)

    # Vectors.

    def format_has_vector(self, axis: str, name: str) -> bool:
        return self._base.format_has_vector(axis, name)

    def format_vectors_set(self, axis: str) -> set[str]:
        return self._base.format_vectors_set(axis)

    def format_get_vector(self, axis: str, name: str) -> tuple[StoredVector, CacheGroup | None]:
        return self._base.format_get_vector(axis, name)

    def format_set_vector(self, axis: str, name: str, vector: StoredVector | StorageScalar) -> None:
        self._tracking.access_vector(axis, name, is_for_modify=True)
        self._writer().format_set_vector(axis, name, vector)

    def format_delete_vector(self, axis: str, name: str, *, for_set: bool) -> None:
        self._tracking.access_vector(axis, name, is_for_modify=True)
        self._writer().format_delete_vector(axis, name, for_set=for_set)

    def format_get_empty_dense_vector(self, axis: str, name: str, dtype: np.dtype) -> np.ndarray:
        self._tracking.access_vector(axis, name, is_for_modify=True)
        return self._writer().format_get_empty_dense_vector(axis, name, dtype)

    def format_filled_empty_dense_vector(self, axis: str, name: str, filled: np.ndarray) -> None:
        self._writer().format_filled_empty_dense_vector(axis, name, filled)

    def format_get_empty_sparse_vector(self, axis: str, name: str, dtype: np.dtype, nnz: int,
                                       indtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        self._tracking.access_vector(axis, name, is_for_modify=True)
        return self._writer().format_get_empty_sparse_vector(axis, name, dtype, nnz, indtype)

    def format_filled_empty_sparse_vector(self, axis: str, name: str, filled: Any) -> None:
        self._writer().format_filled_empty_sparse_vector(axis, name, filled)

    # Matrices.

    def format_has_matrix(self, rows_axis: str, columns_axis: str, name: str) -> bool:
        return self._base.format_has_matrix(rows_axis, columns_axis, name)

    def format_matrices_set(self, rows_axis: str, columns_axis: str) -> set[str]:
        return self._base.format_matrices_set(rows_axis, columns_axis)

    def format_get_matrix(self, rows_axis: str, columns_axis: str, name: str) -> tuple[StoredMatrix,
                                                                                       CacheGroup | None]:
        return self._base.format_get_matrix(rows_axis, columns_axis, name)

    def format_set_matrix(self, rows_axis: str, columns_axis: str, name: str,
                          matrix: StoredMatrix | StorageScalar) -> None:
        self._tracking.access_matrix(rows_axis, columns_axis, name, is_for_modify=True)
        self._writer().format_set_matrix(rows_axis, columns_axis, name, matrix)

    def format_delete_matrix(self, rows_axis: str, columns_axis: str, name: str, *, for_set: bool) -> None:
        self._tracking.access_matrix(rows_axis, columns_axis, name, is_for_modify=True)
        self._writer().format_delete_matrix(rows_axis, columns_axis, name, for_set=for_set)

    def format_get_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                      dtype: np.dtype) -> np.ndarray:
        self._tracking.access_matrix(rows_axis, columns_axis, name, is_for_modify=True)
        return self._writer().format_get_empty_dense_matrix(rows_axis, columns_axis, name, dtype)

    def format_filled_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                         filled: np.ndarray) -> None:
        self._writer().format_filled_empty_dense_matrix(rows_axis, columns_axis, name, filled)

    def format_get_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str, dtype: np.dtype,
                                       nnz: int, indtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self._tracking.access_matrix(rows_axis, columns_axis, name, is_for_modify=True)
        return self._writer().format_get_empty_sparse_matrix(rows_axis, columns_axis, name, dtype, nnz, indtype)

    def format_filled_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str, filled: Any) -> None:
        self._writer().format_filled_empty_sparse_matrix(rows_axis, columns_axis, name, filled)

    def format_discard_empty(self) -> bool:
        return self._writer().format_discard_empty()

    def format_relayout_matrix(self, rows_axis: str, columns_axis: str, name: str, matrix: StoredMatrix) -> None:
        # (as Julia: storing the other layout of a matrix does not change it, so an input may be relayout)
        self._tracking.access_matrix(rows_axis, columns_axis, name, is_for_modify=False)
        self._writer().format_relayout_matrix(rows_axis, columns_axis, name, matrix)

    def _writer(self) -> FormatWriter:
        assert isinstance(self._base, FormatWriter)  # (only a ContractDaf of a DafWriter has write methods)
        return self._base


class _ContractAccess(StateSharingDaf):
    """What :class:`ContractDaf` and :class:`ContractReader` share: the readers that track access (Julia's
    ``ContractDaf`` overrides the same ones), and the wrapped data set's state (lock, cache, version counters)."""

    _tracking: _Tracking

    def _setup(self, tracking: _Tracking, name: str) -> None:
        self._tracking = tracking
        StateSharingDaf.__init__(self, ContractFormat(tracking), tracking.daf, name=name)

    @property
    def daf(self) -> DafReader:
        """The data set this enforces the contract on.

        Example:
            >>> import os, pydaf
            >>> os.environ["DAF_ENFORCE_CONTRACTS"] = "true"
            >>> daf = pydaf.MemoryDaf(name="cells!")
            >>> contractor("example.count", Contract(), daf).daf is daf
            True
        """
        return self._tracking.daf

    @property
    def computation(self) -> str:
        """The name of the computation whose contract this enforces.

        Example:
            >>> import os, pydaf
            >>> os.environ["DAF_ENFORCE_CONTRACTS"] = "true"
            >>> contractor("example.count", Contract(), pydaf.MemoryDaf(name="cells!")).computation
            'example.count'
        """
        return self._tracking.computation

    def _type_text(self) -> str:
        # (Julia's brief: a contract of a contract shows as the inner one, with this name)
        text = self._shared_type_text()
        return text if isinstance(self._tracking.daf, _ContractAccess) else f"Contract {text}"

    def description(self, *, cache: bool = False, deep: bool = False, tensors: bool = True) -> str:
        """The description of the wrapped data set (as Julia's ``ContractDaf`` gives).

        Example:
            >>> import os, pydaf
            >>> os.environ["DAF_ENFORCE_CONTRACTS"] = "true"
            >>> print(contractor("example.count", Contract(), pydaf.MemoryDaf(name="cells!")).description(), end="")
            name: cells!
            type: MemoryDaf
        """
        return self._tracking.daf.description(cache=cache, deep=deep, tensors=tensors)

    def read_only(self, *, name: str | None = None) -> DafReader:
        """A read-only form of this data set that enforces the same contract, sharing what was accessed (itself if
        already read-only and no new name is given).

        Example:
            >>> import os, pydaf
            >>> os.environ["DAF_ENFORCE_CONTRACTS"] = "true"
            >>> daf = pydaf.MemoryDaf(name="cells!").add_axis("cell", ["A"])
            >>> contract_daf = contractor("example.count", Contract(axes={"cell": (RequiredInput, "Cells.")}), daf)
            >>> reader = contract_daf.read_only()
            >>> type(reader).__name__, reader.axis_length("cell"), verify_output(contract_daf)
            ('ContractReader', 1, None)
        """
        if isinstance(self, DafReadOnly) and name is None:
            return self
        return ContractReader(self._tracking, name=unique_name(name or f"{self.name}.read_only"))

    def cached_computation(self, key: QueryCacheKey, compute: Callable[[], tuple[Any, Iterable[Any]]], *,
                           store: bool = True) -> Any:
        # A query result cached earlier (maybe through the wrapped data set) tracks what it was computed from.
        with self._state.lock.read():
            entry = self._state.cache.entry(key)
            if entry is not None and entry.stamp is not None and is_current(self, entry.stamp):
                for dependency in entry.stamp.dependencies:
                    self._tracking.access_dependency(dependency)
            return super().cached_computation(key, compute, store=store)

    # Tracked readers.

    def get_scalar(self, name: str, *, default: Any = Undef) -> Any:
        self._tracking.access_scalar(name, is_for_modify=False)
        return super().get_scalar(name, default=default)

    def axis_vector(self, axis: str, *, default: Any = Undef) -> Any:
        self._tracking.access_axis(axis, is_for_modify=False)
        return super().axis_vector(axis, default=default)

    def axis_indices(self, axis: str, entries: Iterable[str], *, allow_empty: bool = False,
                     allow_missing: bool = False) -> np.ndarray:
        self._tracking.access_axis(axis, is_for_modify=False)
        return super().axis_indices(axis, entries, allow_empty=allow_empty, allow_missing=allow_missing)

    def axis_entries(self, axis: str, indices: Any = None, *, allow_empty: bool = False) -> np.ndarray:
        self._tracking.access_axis(axis, is_for_modify=False)
        return super().axis_entries(axis, indices, allow_empty=allow_empty)

    def axis_length(self, axis: str) -> int:
        self._tracking.access_axis(axis, is_for_modify=False)
        return super().axis_length(axis)

    def get_stored_vector(self, axis: str, name: str, *, default: Any = Undef) -> Any:
        self._tracking.access_vector(axis, name, is_for_modify=False)
        return super().get_stored_vector(axis, name, default=default)

    def get_vector(self, axis: str, name: str, *, default: Any = Undef) -> Any:
        self._tracking.access_vector(axis, name, is_for_modify=False)
        return super().get_vector(axis, name, default=default)

    def get_stored_matrix(self, rows_axis: str, columns_axis: str, name: str, *, default: Any = Undef,
                          relayout: bool = True) -> Any:
        self._tracking.access_matrix(rows_axis, columns_axis, name, is_for_modify=False)
        return super().get_stored_matrix(rows_axis, columns_axis, name, default=default, relayout=relayout)

    def get_stored_matrix_columns(self, rows_axis: str, columns_axis: str, name: str, columns: Any) -> Any:
        self._tracking.access_matrix(rows_axis, columns_axis, name, is_for_modify=False)
        return super().get_stored_matrix_columns(rows_axis, columns_axis, name, columns)

    def get_matrix(self, rows_axis: str, columns_axis: str, name: str, *, default: Any = Undef,
                   relayout: bool = True) -> Any:
        self._tracking.access_matrix(rows_axis, columns_axis, name, is_for_modify=False)
        return super().get_matrix(rows_axis, columns_axis, name, default=default, relayout=relayout)


class ContractDaf(_ContractAccess, DafWriter):
    """A data set that enforces a :class:`Contract` on a writable data set (Julia's ``ContractDaf``): made by
    :func:`contractor`, not directly. It reads and writes the wrapped data set (sharing its lock, cache and version
    counters), refuses access to what the contract does not list (unless relaxed) and changes of its inputs, and
    tracks what the computation accessed for :func:`verify_output`.

    Example:
        >>> import os, pydaf
        >>> os.environ["DAF_ENFORCE_CONTRACTS"] = "true"
        >>> daf = pydaf.MemoryDaf(name="cells!").add_axis("cell", ["A", "B"])
        >>> contract_daf = contractor("example.count", Contract(axes=[("cell", (RequiredInput, "The cells."))]), daf)
        >>> type(contract_daf).__name__, repr(contract_daf), contract_daf.axis_length("cell")
        ('ContractDaf', 'Contract MemoryDaf cells!.for.count', 2)
    """

    def __init__(self, tracking: _Tracking, *, name: str) -> None:
        self._setup(tracking, name)


class ContractReader(_ContractAccess, DafReadOnly):
    """A :class:`ContractDaf` of a read-only data set (a view, a read-only chain or wrapper, a file opened ``r``):
    it has no write methods.

    Example:
        >>> import os, pydaf
        >>> os.environ["DAF_ENFORCE_CONTRACTS"] = "true"
        >>> daf = pydaf.MemoryDaf(name="cells!").add_axis("cell", ["A", "B"]).read_only()
        >>> contract_daf = contractor("example.count", Contract(axes=[("cell", (RequiredInput, "The cells."))]), daf)
        >>> type(contract_daf).__name__, hasattr(contract_daf, "set_scalar")
        ('ContractReader', False)
    """

    write_hint = "a contract's data set of a read-only data set is read-only: write to a writable data set"

    def __init__(self, tracking: _Tracking, *, name: str) -> None:
        self._setup(tracking, name)


def contractor(computation: str, contract: Contract, daf: DafReader, *, name: str | None = None,
               overwrite: bool = False) -> DafReader:
    """Wrap ``daf`` to enforce ``contract`` for a ``computation`` (its qualified name, for messages), allowing it to
    ``overwrite`` existing outputs. When contracts are not enforced (:func:`contracts_enforced`), this is ``daf``
    itself. Otherwise it is a :class:`ContractDaf` (a :class:`ContractReader` for a read-only ``daf``) named
    ``<name>.for.<computation>``, ``name`` being the last part of the given ``name`` or ``daf``'s name. Raises a
    :class:`~pydaf.DafContractError` when a property uses an axis the contract doesn't list, or lists it with an
    incompatible expectation.

    Example:
        >>> import os, pydaf
        >>> os.environ["DAF_ENFORCE_CONTRACTS"] = "true"
        >>> daf = pydaf.MemoryDaf(name="cells!").add_axis("cell", ["A", "B"])
        >>> contractor("example.count", Contract(axes=[("cell", (RequiredInput, "The cells."))]), daf).name
        'cells!.for.count'
        >>> contractor("example.age", Contract(data=[(("cell", "age"), (RequiredInput, "Int64", "Ages."))]), daf)
        Traceback (most recent call last):
        ...
        pydaf.errors.DafContractError: non-contract axis: cell
        for the RequiredInput vector: age
        for the computation: example.age
        on the daf data: cells!.for.age
        >>> os.environ["DAF_ENFORCE_CONTRACTS"] = "false"
        >>> contractor("example.count", Contract(), daf) is daf
        True
        >>> os.environ["DAF_ENFORCE_CONTRACTS"] = "true"
    """
    if not isinstance(contract, Contract):
        raise DafValueError(f"invalid contract: {contract!r}\n(expected a pydaf Contract)")
    if not isinstance(daf, DafReader):
        raise DafValueError(f"invalid daf data: {daf!r}\n(expected a pydaf DafReader)")
    if not contracts_enforced():
        return daf
    base_name = daf.name if name is None else name.split(".")[-1]
    contract_name = unique_name(f"{base_name}.for.{computation.split('.')[-1]}")
    tracking = _Tracking(computation, contract, daf, contract_name, overwrite)
    if isinstance(daf, DafWriter):
        return ContractDaf(tracking, name=contract_name)
    return ContractReader(tracking, name=contract_name)


def verify_input(contract_daf: DafReader) -> None:
    """Check a contract's data set before its computation runs: every required input exists, with its type; every
    optional input that exists has its type; no created output exists yet (unless ``overwrite``). A no-op for a data
    set that is not a contract's (contracts not enforced). Raises a :class:`~pydaf.DafContractError`.

    Example:
        >>> import os, pydaf
        >>> os.environ["DAF_ENFORCE_CONTRACTS"] = "true"
        >>> contract = Contract(axes=[("cell", (RequiredInput, "The cells."))])
        >>> verify_input(contractor("example.count", contract, pydaf.MemoryDaf(name="empty!")))
        Traceback (most recent call last):
        ...
        pydaf.errors.DafContractError: missing input axis: cell
        for the computation: example.count
        on the daf data: empty!
    """
    if isinstance(contract_daf, _ContractAccess):
        contract_daf._tracking.verify(is_for_output=False)


def verify_output(contract_daf: DafReader) -> None:
    """Check a contract's data set after its computation ran: every created output exists, with its type; every
    optional output that exists has its type; and every required input that exists was accessed (else it was not
    required). A no-op for a data set that is not a contract's. Raises a :class:`~pydaf.DafContractError`.

    Example:
        >>> import os, pydaf
        >>> os.environ["DAF_ENFORCE_CONTRACTS"] = "true"
        >>> daf = pydaf.MemoryDaf(name="cells!").add_axis("cell", ["A", "B"])
        >>> contract_daf = contractor("example.count", Contract(axes=[("cell", (RequiredInput, "The cells."))]), daf)
        >>> verify_output(contract_daf)
        Traceback (most recent call last):
        ...
        pydaf.errors.DafContractError: unused RequiredInput axis: cell
        of the computation: example.count
        on the daf data: cells!
        >>> _ = contract_daf.axis_length("cell")
        >>> verify_output(contract_daf)
    """
    if isinstance(contract_daf, _ContractAccess):
        contract_daf._tracking.verify(is_for_output=True)
