"""The ops, expectations and skips of Julia's recorded cases of ``computations.jl and adapters.jl`` (see
``tests/composition.py``).

The test functions of ``test/computations.jl`` (each record's ``definitions``) are translated here, one builder each,
with ``__module__ = "Main"`` so that messages name them as Julia does (``Main.single``). They are built on first use:
``missing_second`` and ``missing_default`` fail when decorated (pydaf fills the docstring then; Julia fails when the
documentation is shown), which is what their records assert. Computations run with contracts enforced
(``DAF_ENFORCE_CONTRACTS``, as Julia's test suite runs).
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from .composition import _ACTS_ON_VAR, SKIPS, Session, _kwargs, op

SKIPS["test/computations.jl:206"] = (
    "Julia reports the first missing input axis in the iteration order of its Dict of axes, a hash order (here gene "
    "before cell, though the contract lists cell first); pydaf checks in the contract's order and reports cell. "
    "test_computations.py asserts both texts: cell when both are missing, Julia's gene text when only gene is")


@contextmanager
def enforced_contracts() -> Iterator[None]:
    """Contracts enforced while the block runs (``DAF_ENFORCE_CONTRACTS=true``), as Julia's test suite runs."""
    from pydaf.composition.contracts import contracts_enforced

    previous = os.environ.get("DAF_ENFORCE_CONTRACTS")
    os.environ["DAF_ENFORCE_CONTRACTS"] = "true"
    try:
        assert contracts_enforced(), "DAF_ENFORCE_CONTRACTS=true does not enforce contracts"
        yield
    finally:
        if previous is None:
            del os.environ["DAF_ENFORCE_CONTRACTS"]
        else:
            os.environ["DAF_ENFORCE_CONTRACTS"] = previous


def in_main(function: Callable) -> Callable:
    """The function as if defined in Julia's ``Main`` (its messages name it ``Main.<name>``)."""
    function.__module__ = "Main"
    function.__qualname__ = function.__name__
    return function


# The test functions of test/computations.jl.

BUILDERS: dict[str, Callable[[], Callable]] = {}


def builder(build: Callable[[], Callable]) -> Callable[[], Callable]:
    cached = functools.cache(build)
    BUILDERS[build.__name__] = cached
    return cached


@builder
def not_computation() -> Callable:
    @in_main
    def not_computation() -> None:
        return None

    return not_computation


@builder
def none() -> Callable:
    from pydaf.composition.computations import documented

    @documented
    @in_main
    def none(*, x: Any = 1) -> Any:
        """None

        Just a function with a default `x` of {DEFAULT.x}.
        """
        return x

    return none


@functools.cache
def single_contract() -> Any:
    from pydaf.composition.contracts import Contract, CreatedOutput, OptionalInput, OptionalOutput, RequiredInput
    from pydaf.storage_types import StorageFloat

    return Contract(
        axes=[
            ("cell", (RequiredInput, "The sampled single cells.")),
            ("gene", (RequiredInput, "The sampled genes.")),
            ("block", (OptionalOutput, "Blocks of cells.")),
        ],
        data=[
            ("version", (OptionalInput, str, "In major.minor.patch format.")),
            ("quality", (CreatedOutput, np.float64, "Overall output quality score between 0.0 and 1.0.")),
            (("gene", "noisy"), (OptionalInput, np.bool_, "Mask of genes with high variability.")),
            (("cell", "special"), (OptionalOutput, np.bool_, "Computed mask of special cells, if requested.")),
            (("cell", "gene", "UMIs"),
             (RequiredInput, (np.uint8, np.uint16, np.uint32, np.uint64), "The number of sampled scRNA molecules.")),
            (("block", "cell", "gene", "match"),
             (OptionalOutput, StorageFloat, "How well the gene of the cell match the block.")),
        ],
    )


@builder
def single() -> Callable:
    from pydaf.composition.computations import computation

    @computation(single_contract())
    @in_main
    def single(daf: Any, quality: float, optional: int = 1, *, named: str = "Foo") -> None:
        """Single

        The `quality` is mandatory. The default `optional` is {DEFAULT.optional}. The default `named` is {DEFAULT.named}.

        {CONTRACT}
        """  # noqa: E501 (Julia's line, kept whole)
        daf.get_matrix("cell", "gene", "UMIs")
        daf.set_scalar("quality", quality)

    return single


def _first_and_second() -> tuple[Any, Any]:
    from pydaf.composition.contracts import Contract, CreatedOutput, RequiredInput

    first = Contract(data=[
        ("version", (RequiredInput, str, "In major.minor.patch format.")),
        ("quality", (CreatedOutput, np.float64, "Overall output quality score between 0.0 and 1.0.")),
    ])
    second = Contract(name="second", data=[
        ("version", (CreatedOutput, str, "In major.minor.patch format.")),
        ("quality", (RequiredInput, np.float64, "Overall output quality score between 0.0 and 1.0.")),
    ])
    return first, second


@builder
def cross() -> Callable:
    from pydaf.composition.computations import computation

    @computation(*_first_and_second())
    @in_main
    def cross(first: Any, *, second: Any, overwrite: bool = False) -> None:
        """Dual

        # First

        {CONTRACT1}

        # Second

        {CONTRACT2}
        """
        second.set_scalar("version", first.get_scalar("version"), overwrite=overwrite)
        first.set_scalar("quality", second.get_scalar("quality"), overwrite=overwrite)

    return cross


@builder
def cross_note() -> Callable:
    from pydaf.composition.computations import computation
    from pydaf.composition.contracts import Contract, CreatedOutput

    @computation(*_first_and_second(), Contract(name="third", data=[("note", (CreatedOutput, str, "Some note."))]))
    @in_main
    def cross_note(first: Any, *, second: Any, third: Any, overwrite: bool = False) -> None:
        """Triple

        # First

        {CONTRACT1}

        # Second

        {CONTRACT2}

        # Third

        {CONTRACT3}
        """
        third.set_scalar("note", "Noteworthy.")
        second.set_scalar("version", first.get_scalar("version"), overwrite=overwrite)
        first.set_scalar("quality", second.get_scalar("quality"), overwrite=overwrite)

    return cross_note


@builder
def relaxed() -> Callable:
    from pydaf.composition.computations import computation
    from pydaf.composition.contracts import Contract

    @computation(Contract(is_relaxed=True))
    @in_main
    def relaxed(daf: Any) -> None:
        """Relaxed

        {CONTRACT}
        """

    return relaxed


@builder
def missing_default() -> Callable:
    from pydaf.composition.computations import computation
    from pydaf.composition.contracts import Contract

    @computation(Contract())
    @in_main
    def missing_default(daf: Any, x: int) -> None:
        """Missing

        {DEFAULT.x}
        """

    return missing_default


@builder
def missing_second() -> Callable:
    from pydaf.composition.computations import computation
    from pydaf.composition.contracts import Contract

    @computation(Contract())
    @in_main
    def missing_second(first: Any, second: Any) -> None:
        """Missing

        {CONTRACT1}

        {CONTRACT2}
        """

    return missing_second


# Ops (COMPOSITION.md §5.3).


def _argument(session: Session, value: Any) -> Any:
    """A call argument: a variable's name is its value (a data set), anything else a value."""
    if isinstance(value, str) and value in session.variables:
        return session.variables[value]
    return session.value(value)


@op("call_computation")
def _call_computation(session: Session, spec: dict) -> Any:
    function = BUILDERS[spec["function"]]()
    args = [_argument(session, value) for value in spec["args"]]
    kwargs = {key: _argument(session, value) for key, value in (spec.get("kwargs") or {}).items()}
    with enforced_contracts():
        return function(*args, **kwargs)


@op("function_contract")
def _function_contract(session: Session, spec: dict) -> Any:
    from pydaf.composition.computations import function_contract

    return function_contract(BUILDERS[spec["function"]](), *([spec["index"] - 1] if "index" in spec else []))


@op("function_default")
def _function_default(session: Session, spec: dict) -> Any:
    from pydaf.composition.computations import function_default

    return function_default(BUILDERS[spec["function"]](), spec["parameter"])


@op("doc")
def _doc(session: Session, spec: dict) -> Any:
    # Julia's formatdoc(@doc f): the docstring as Markdown, ending with a newline.
    return inspect.getdoc(BUILDERS[spec["function"]]()) + "\n"


@op("adapter")
def _adapter(session: Session, spec: dict) -> Any:
    from pydaf.composition.adapters import adapter

    kwargs = _kwargs(session, spec, pairs=("input_axes", "input_data", "output_axes", "output_data", "empty"))
    computation = spec["computation"]
    with adapter(session.daf(spec["daf"]), **kwargs) as adapted:
        (parameter,) = computation["params"]
        session.variables[parameter] = adapted
        for body_op in computation["body"]:
            result = session.run(body_op)
            if "var" in body_op and body_op["op"] not in _ACTS_ON_VAR:
                session.variables[body_op["var"]] = result
    return session.value(computation["returns"])
