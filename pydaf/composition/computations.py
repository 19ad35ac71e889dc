"""Computations (Julia's ``Computations``, with ``@documented`` of TanayLabUtilities): functions on Daf data that
declare a :class:`~pydaf.composition.contracts.Contract` of their inputs and outputs, which is enforced when they are
called and written into their documentation.

``@computation(contract)`` (one to three contracts, as Julia's ``@computation``) wraps a function so that each call:

1. finds the data set of each contract among the arguments: an unnamed contract (``Contract(name=None)``) applies to
   the function's first parameter, a named one to the parameter of that name (Julia requires a keyword parameter;
   here a positional one works too);
2. wraps each in :func:`~pydaf.composition.contracts.contractor` (named after the function, ``<module>.<qualname>``,
   as Julia names it ``Main.single``), with the call's ``overwrite`` argument if the function has one;
3. runs :func:`~pydaf.composition.contracts.verify_input` on each, calls the function with the wrapped data sets,
   and runs :func:`~pydaf.composition.contracts.verify_output` on each (not if the function raised).

Contracts are enforced when the environment variable ``DAF_ENFORCE_CONTRACTS`` is true (as in Julia); otherwise the
data sets are passed through unchanged and only the documentation is built.

Documentation: the placeholders of Julia's docstrings keep their names, written in braces in the function's docstring
(pydaf's spelling of Julia's ``$(CONTRACT)``): ``{CONTRACT}`` (the contract; the first of several), ``{CONTRACT1}``,
``{CONTRACT2}``, ``{CONTRACT3}`` (the contract of the first, second, third data set), and ``{DEFAULT.x}`` (the
default value of the parameter ``x``, as Julia formats it: `` `1` ``, `` `"Foo"` ``). They are filled when the function
is decorated: a contract becomes its Markdown description (:func:`~pydaf.composition.contracts.contract_documentation`,
indented as the placeholder's line), so ``help(f)`` shows the contract. Only these exact placeholders are replaced;
other braces in a docstring are left alone. A placeholder that cannot be filled (a ``{CONTRACT2}`` of a function with
one contract, a ``{DEFAULT.x}`` of a parameter without a default) raises a :class:`~pydaf.DafValueError` with Julia's
message when the function is decorated (Julia raises it when the documentation is shown). The objects
:data:`CONTRACT`, :data:`CONTRACT1`, :data:`CONTRACT2`, :data:`CONTRACT3` and :data:`DEFAULT` spell the same
placeholders (``str(DEFAULT.x) == "{DEFAULT.x}"``), for docstrings built in code.

``@documented`` is Julia's ``@documented``: ``{DEFAULT.x}`` and :func:`function_default` for a function without a
contract. :func:`function_contract` and :func:`function_default` read what the decorators recorded.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from ..core.brief import brief
from ..core.readers import DafReader
from ..errors import DafTypeError, DafValueError
from .contracts import Contract, contract_documentation, contractor, verify_input, verify_output

__all__ = [
    "CONTRACT",
    "CONTRACT1",
    "CONTRACT2",
    "CONTRACT3",
    "DEFAULT",
    "FunctionMetadata",
    "computation",
    "documented",
    "function_contract",
    "function_default",
]

Function = TypeVar("Function", bound=Callable[..., Any])

#: The placeholder of the (first) contract's description in a :func:`computation`'s docstring.
CONTRACT = "{CONTRACT}"
#: The placeholder of the first data set's contract (a computation of two or three contracts).
CONTRACT1 = "{CONTRACT1}"
#: The placeholder of the second data set's contract.
CONTRACT2 = "{CONTRACT2}"
#: The placeholder of the third data set's contract.
CONTRACT3 = "{CONTRACT3}"


class _Defaults:
    """``DEFAULT.x`` is the placeholder ``{DEFAULT.x}``: the default value of the parameter ``x`` in the docstring of a
    :func:`computation` or :func:`documented` function."""

    def __getattr__(self, parameter: str) -> str:
        if parameter.startswith("__"):
            raise AttributeError(parameter)
        return f"{{DEFAULT.{parameter}}}"

    def __repr__(self) -> str:
        return "DEFAULT"


#: ``DEFAULT.x`` spells the placeholder ``{DEFAULT.x}`` (the default of the parameter ``x``).
DEFAULT = _Defaults()

_PLACEHOLDER = re.compile(r"\{(?:CONTRACT([123]?)|DEFAULT\.([A-Za-z_][A-Za-z0-9_]*))\}")

_ORDINALS = {2: "second", 3: "third"}


@dataclass(frozen=True)
class FunctionMetadata:
    """What :func:`computation` or :func:`documented` recorded of a function (Julia's ``FunctionMetadata``): its
    contracts (none for :func:`documented`), the defaults of its parameters, and its full name."""

    full_name: str
    contracts: tuple[Contract, ...] = ()
    defaults: dict[str, Any] = field(default_factory=dict)


def _full_name(function: Callable[..., Any]) -> str:
    return f"{function.__module__}.{function.__qualname__}"


def _metadata(function: Callable[..., Any]) -> FunctionMetadata:
    metadata = getattr(function, "__daf_metadata__", None)
    if not isinstance(metadata, FunctionMetadata):
        name = _full_name(function) if hasattr(function, "__qualname__") else repr(function)
        raise DafValueError(f"not a @documented function: {name}\n(decorate it with @computation(...) or "
                            f"@documented)")
    return metadata


def _defaults(function: Callable[..., Any]) -> dict[str, Any]:
    return {name: parameter.default for name, parameter in inspect.signature(function).parameters.items()
            if parameter.default is not inspect.Parameter.empty}


def _missing_default(parameter: str, full_name: str) -> DafValueError:
    return DafValueError(f"no parameter (with default): {parameter}\nexists for the function: {full_name}")


def _fill_documentation(doc: str | None, metadata: FunctionMetadata) -> str | None:
    """The docstring with its placeholders filled (see the module documentation); multi-line text is indented as the
    placeholder's line, and a placeholder alone on its line that fills to nothing takes its line (and one of the
    blank lines around it) away, as Julia's Markdown rendering collapses the empty paragraph."""
    if doc is None or _PLACEHOLDER.search(doc) is None:
        return doc
    lines: list[str] = []
    dropped = False
    for line in doc.split("\n"):
        if dropped and line.strip() == "" and lines and lines[-1].strip() == "":
            dropped = False
            continue  # (the blank line after a dropped placeholder, when one precedes it)
        dropped = False
        indent = line[:len(line) - len(line.lstrip())]

        def indented(match: re.Match, indent: str = indent) -> str:
            return _placeholder_text(match, metadata).replace("\n", "\n" + indent)

        filled = _PLACEHOLDER.sub(indented, line)
        if filled.strip() == "" and line.strip() != "":
            dropped = True  # (an empty contract alone on its line: an empty paragraph, which Markdown drops)
            continue
        lines.append("\n".join(text if text.strip() else "" for text in filled.split("\n")))
    return "\n".join(lines)


def _placeholder_text(match: re.Match, metadata: FunctionMetadata) -> str:
    number, parameter = match.group(1), match.group(2)
    if parameter is not None:
        if parameter not in metadata.defaults:
            raise _missing_default(parameter, metadata.full_name)
        return f"`{brief(metadata.defaults[parameter])}`"
    index = int(number) if number else 1
    if index > len(metadata.contracts):
        ordinal = f"{_ORDINALS[index]} " if index > 1 else ""
        contracts = " ".join(["Contract(...)"] * index)
        python = ", ".join(["Contract(...)"] * index)
        raise DafValueError(f"no {ordinal}contract associated with: {metadata.full_name}\n"
                            f"use: @computation {contracts} function {metadata.full_name}(...)\n"
                            f"(in Python: @computation({python}) on its def)")
    # (the description without its leading and trailing blank lines: the docstring's own lines separate it)
    return contract_documentation(metadata.contracts[index - 1]).strip("\n")


def documented(function: Function) -> Function:
    """Julia's ``@documented`` (TanayLabUtilities): record the defaults of ``function``'s parameters, for
    :func:`function_default`, and fill ``{DEFAULT.x}`` in its docstring with the default of ``x``. Returns the function
    itself. (:func:`computation` does this too.)

    Example:
        >>> @documented
        ... def scale(values, *, factor: float = 2.0):
        ...     '''Multiply the values by the factor (by default {DEFAULT.factor}).'''
        ...     return [value * factor for value in values]
        >>> scale.__doc__
        'Multiply the values by the factor (by default `2.0`).'
        >>> function_default(scale, "factor")
        2.0
    """
    metadata = FunctionMetadata(full_name=_full_name(function), defaults=_defaults(function))
    function.__doc__ = _fill_documentation(function.__doc__, metadata)
    function.__daf_metadata__ = metadata  # type: ignore[attr-defined]
    return function


def computation(contract: Contract, *more_contracts: Contract) -> Callable[[Function], Function]:
    """Make a function a Daf computation (Julia's ``@computation``) with one to three contracts: each call verifies
    its inputs before and its outputs after, and its docstring's ``{CONTRACT}`` (``{CONTRACT1}``…``{CONTRACT3}``) and
    ``{DEFAULT.x}`` are filled (see the module documentation). An unnamed contract applies to the first parameter, a
    contract named ``second`` to the parameter ``second``; at most one contract may be unnamed. A parameter called
    ``overwrite`` is passed to :func:`~pydaf.composition.contracts.contractor` (letting the computation replace
    outputs that exist). Errors name the computation ``<module>.<qualname>`` (Julia: ``Main.single``).

    Example:
        >>> import os, pydaf
        >>> from pydaf.composition.contracts import Contract, CreatedOutput, RequiredInput
        >>> from pydaf.storage_types import StorageInteger
        >>> os.environ["DAF_ENFORCE_CONTRACTS"] = "true"
        >>> TOTAL = Contract(axes=[("cell", (RequiredInput, "The cells."))],
        ...                  data=[(("cell", "UMIs"), (RequiredInput, StorageInteger, "Molecules per cell.")),
        ...                        ("total", (CreatedOutput, "Int64", "All molecules."))])
        >>> @computation(TOTAL)
        ... def total_umis(daf, *, overwrite: bool = False) -> None:
        ...     '''Sum the UMIs of all the cells.
        ...
        ...     {CONTRACT}
        ...     '''
        ...     daf.set_scalar("total", int(daf.get_vector("cell", "UMIs").sum()), overwrite=overwrite)
        >>> daf = pydaf.MemoryDaf(name="cells!").add_axis("cell", ["A", "B"])
        >>> total_umis(daf)
        Traceback (most recent call last):
        ...
        pydaf.errors.DafContractError: missing input vector: UMIs
        of the axis: cell
        with element type: Union{Int16, Int32, Int64, Int8, UInt16, UInt32, UInt64, UInt8}
        for the computation: pydaf.composition.computations.total_umis
        on the daf data: cells!
        >>> total_umis(daf.set_vector("cell", "UMIs", [3, 4]))
        >>> int(daf.get_scalar("total"))
        7
        >>> print(inspect.getdoc(total_umis))
        Sum the UMIs of all the cells.
        <BLANKLINE>
        ## Inputs
        <BLANKLINE>
        ### Axes
        <BLANKLINE>
        **cell** (required): The cells.
        <BLANKLINE>
        ### Vectors
        <BLANKLINE>
        **cell @ UMIs**::Union{Int16, Int32, Int64, Int8, UInt16, UInt32, UInt64, UInt8} (required): Molecules per cell.
        <BLANKLINE>
        ## Outputs
        <BLANKLINE>
        ### Scalars
        <BLANKLINE>
        **total**::Int64 (created): All molecules.
    """
    contracts = (contract, *more_contracts)
    if len(contracts) > 3:
        raise DafValueError(f"too many contracts: {len(contracts)}\nfor @computation (it takes one to three)")
    for each in contracts:
        if not isinstance(each, Contract):
            raise DafTypeError(f"not a Contract: {each!r}\nfor @computation(contract, ...)")
    if sum(each.name is None for each in contracts) > 1:
        raise DafValueError(f"at most one of {len(contracts)} contracts can be an unnamed parameter\n"
                            f"for @computation (give the others name=\"<parameter>\")")

    def decorate(function: Function) -> Function:
        full_name = _full_name(function)
        signature = inspect.signature(function)
        parameters = list(signature.parameters)
        targets = []
        for each in contracts:
            if each.name is None:
                if not parameters:
                    raise DafValueError(f"no daf parameter for the unnamed contract\nof the computation: {full_name}")
                targets.append((parameters[0], f"{full_name}.daf"))
            elif each.name in parameters:
                targets.append((each.name, f"{full_name}.{each.name}"))
            else:
                raise DafValueError(f"missing daf keyword parameter: {each.name}\nof the computation: {full_name}\n"
                                    f"(its parameters: {', '.join(parameters) or 'none'})")
        metadata = FunctionMetadata(full_name=full_name, contracts=contracts, defaults=_defaults(function))

        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            overwrite = bound.arguments.get("overwrite", False)
            if not isinstance(overwrite, bool | np.bool_):
                raise DafTypeError(f"non-Bool overwrite keyword parameter type: {type(overwrite).__name__} = "
                                   f"{overwrite!r}\nfor the computation: {full_name}")
            contract_dafs = []
            for each, (parameter, name) in zip(contracts, targets, strict=True):
                daf = bound.arguments.get(parameter)
                if not isinstance(daf, DafReader):
                    raise DafTypeError(f"not a daf data set: {daf!r}\nfor the parameter: {parameter}\n"
                                       f"for the computation: {full_name}")
                contract_dafs.append(contractor(full_name, each, daf, name=name, overwrite=bool(overwrite)))
            for (parameter, _), contract_daf in zip(targets, contract_dafs, strict=True):
                bound.arguments[parameter] = contract_daf
            for contract_daf in contract_dafs:
                verify_input(contract_daf)
            result = function(*bound.args, **bound.kwargs)
            for contract_daf in contract_dafs:
                verify_output(contract_daf)
            return result

        call.__doc__ = _fill_documentation(function.__doc__, metadata)
        call.__daf_metadata__ = metadata  # type: ignore[attr-defined]
        return call  # type: ignore[return-value]

    return decorate


def function_contract(function: Callable[..., Any], index: int = 0) -> Contract:
    """The contract of a :func:`computation` (Julia's ``function_contract``): the first by default, the ``index``-th
    (0-based) of a computation with several.

    Example:
        >>> from pydaf.composition.contracts import Contract
        >>> CONTRACT_OF_NOTHING = Contract()
        >>> @computation(CONTRACT_OF_NOTHING)
        ... def nothing(daf) -> None:
        ...     pass
        >>> function_contract(nothing) is CONTRACT_OF_NOTHING
        True
    """
    metadata = _metadata(function)
    if not 0 <= index < len(metadata.contracts):
        count = len(metadata.contracts)
        raise DafValueError(f"no contract with index: {index}\nfor the function: {metadata.full_name}\n"
                            + (f"(it has {count} contract{'s' if count > 1 else ''}: indices 0 to {count - 1})"
                               if count else "(it has no contract: it is @documented, not a @computation)"))
    return metadata.contracts[index]


def function_default(function: Callable[..., Any], parameter: str) -> Any:
    """The default value of a parameter of a :func:`computation` or :func:`documented` function (Julia's
    ``function_default``), for another function to reuse.

    Example:
        >>> @documented
        ... def smooth(values, window: int = 5):
        ...     return values
        >>> function_default(smooth, "window")
        5
        >>> function_default(smooth, "values")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafValueError: no parameter (with default): values
        exists for the function: pydaf.composition.computations.smooth
    """
    metadata = _metadata(function)
    if parameter not in metadata.defaults:
        raise _missing_default(parameter, metadata.full_name)
    return metadata.defaults[parameter]
