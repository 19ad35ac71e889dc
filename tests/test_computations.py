"""pydaf.composition.computations: ``@computation``, ``@documented``, ``function_contract``, ``function_default``
and the docstring placeholders; Julia's assertions of ``test/computations.jl`` that the recorded subset leaves out (on
MemoryDaf and H5df), and what Python adds (views, chains, files, enforcement off, an adapter around a computation)."""

from __future__ import annotations

import doctest
import inspect
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import pydaf
from pydaf.composition.adapters import adapter
from pydaf.composition.computations import (
    CONTRACT,
    CONTRACT1,
    CONTRACT2,
    CONTRACT3,
    DEFAULT,
    computation,
    documented,
    function_contract,
    function_default,
)
from pydaf.composition.contracts import (
    Contract,
    ContractDaf,
    ContractReader,
    CreatedOutput,
    OptionalInput,
    RequiredInput,
)

from .composition_computations import BUILDERS, in_main, single_contract

PAGE = Path(__file__).resolve().parent.parent / "docs" / "computations.md"


@pytest.fixture(autouse=True)
def enforced(monkeypatch) -> None:
    monkeypatch.setenv("DAF_ENFORCE_CONTRACTS", "true")


@pytest.fixture(params=["memory", "h5df"])
def new_daf(request, tmp_path) -> Iterator:
    opened = []

    def new(name: str) -> pydaf.DafWriter:
        if request.param == "memory":
            return pydaf.MemoryDaf(name=name)
        opened.append(pydaf.H5df(tmp_path / f"daf{len(opened)}.h5df", "w", name=name))
        return opened[-1]

    yield new
    for daf in opened:
        daf.close()


def _single_inputs(daf: pydaf.DafWriter) -> pydaf.DafWriter:
    daf.add_axis("cell", ["A", "B"]).add_axis("gene", ["X", "Y", "Z"])
    return daf.set_matrix("cell", "gene", "UMIs", np.array([[0, 1, 2], [3, 4, 5]], np.uint8))


# Julia's assertions of test/computations.jl that are not among the recorded cases.


def test_function_contract_is_the_contract_itself():
    assert function_contract(BUILDERS["single"]()) is single_contract()


def test_function_default_of_a_parameter_without_default():
    with pytest.raises(pydaf.DafValueError) as raised:
        function_default(BUILDERS["single"](), "quality")
    assert "no parameter (with default): quality\nexists for the function: Main.single" in str(raised.value)


def test_none_with_a_parameter_and_its_docs():
    none = BUILDERS["none"]()
    assert none() == 1 and none(x=2) == 2
    assert inspect.getdoc(none) + "\n" == "None\n\nJust a function with a default `x` of `1`.\n"


def test_single_runs_and_reports_the_first_missing_axis(new_daf):
    single = BUILDERS["single"]()
    daf = _single_inputs(new_daf("memory!"))
    assert single(daf, 0.0) is None
    assert float(daf.get_scalar("quality")) == 0.0
    empty = new_daf("memory!")
    # (Julia's Dict order reports gene first; pydaf the contract's order: cell, then gene once cell exists)
    with pytest.raises(pydaf.DafContractError) as raised:
        single(empty, 0.0)
    assert str(raised.value) == "missing input axis: cell\nfor the computation: Main.single\non the daf data: memory!"
    empty.add_axis("cell", ["A"])
    with pytest.raises(pydaf.DafContractError) as raised:
        single(empty, 0.0)
    assert str(raised.value) == "missing input axis: gene\nfor the computation: Main.single\non the daf data: memory!"


def test_single_docs():
    assert inspect.getdoc(BUILDERS["single"]()) + "\n" == """Single

The `quality` is mandatory. The default `optional` is `1`. The default `named` is `\"Foo\"`.

## Inputs

### Scalars

**version**::String (optional): In major.minor.patch format.

### Axes

**cell** (required): The sampled single cells.

**gene** (required): The sampled genes.

### Vectors

**gene @ noisy**::Bool (optional): Mask of genes with high variability.

### Matrices

**cell, gene @ UMIs**::Union{UInt16, UInt32, UInt64, UInt8} (required): The number of sampled scRNA molecules.

## Outputs

### Scalars

**quality**::Float64 (created): Overall output quality score between 0.0 and 1.0.

### Axes

**block** (optional): Blocks of cells.

### Vectors

**cell @ special**::Bool (optional): Computed mask of special cells, if requested.

### Tensors

**block; cell, gene @ match**::Union{Float32, Float64} (optional): How well the gene of the cell match the block.
"""


def test_relaxed_docs():
    assert inspect.getdoc(BUILDERS["relaxed"]()) + "\n" == """Relaxed

## Inputs

Additional inputs may be used depending on the parameter(s).

## Outputs

Additional outputs may be created depending on the parameter(s).
"""


def test_cross_note_writes_the_third(new_daf):
    first, second, third = new_daf("first!"), new_daf("second!"), new_daf("third!")
    first.set_scalar("version", "0.0")
    second.set_scalar("quality", 1.0)
    assert BUILDERS["cross_note"]()(first, second=second, third=third) is None
    assert float(first.get_scalar("quality")) == 1.0
    assert second.get_scalar("version") == "0.0"
    assert third.get_scalar("note") == "Noteworthy."


@pytest.mark.parametrize(("which", "expected"), [
    ("first", "missing input scalar: version\nwith type: String\nfor the computation: Main.cross\n"
              "on the daf data: first!"),
    ("second", "missing input scalar: quality\nwith type: Float64\nfor the computation: Main.cross\n"
               "on the daf data: second!"),
])
def test_cross_missing_input(new_daf, which, expected):
    first, second = new_daf("first!"), new_daf("second!")
    if which == "first":
        second.set_scalar("quality", 0.0)
    else:
        first.set_scalar("version", "0.0")
    with pytest.raises(pydaf.DafContractError) as raised:
        BUILDERS["cross"]()(first, second=second)
    assert expected in str(raised.value)
    assert not first.has_scalar("quality") and not second.has_scalar("version")  # (nothing ran)


def test_missing_second_contract_and_missing_default_fail_when_decorated():
    builders = {"missing_second": "no second contract associated with: Main.missing_second\nuse: @computation "
                                  "Contract(...) Contract(...) function Main.missing_second(...)",
                "missing_default": "no parameter (with default): x\nexists for the function: Main.missing_default"}
    for name, expected in builders.items():
        with pytest.raises(pydaf.DafValueError) as raised:
            BUILDERS[name]()
        assert expected in str(raised.value), str(raised.value)


# Beyond Julia's tests.

MEAN_AGE = Contract(axes=[("cell", (RequiredInput, "The cells."))],
                    data=[(("cell", "age"), (RequiredInput, "StorageInteger", "The age of each cell.")),
                          (("cell", "batch"), (OptionalInput, str, "The batch of each cell."))])


@computation(MEAN_AGE)
def mean_age(daf: pydaf.DafReader) -> float:
    """The mean age of the cells.

    {CONTRACT}
    """
    return float(np.mean(daf.get_vector("cell", "age")))


def _cells(name: str = "cells!") -> pydaf.DafWriter:
    daf = pydaf.MemoryDaf(name=name).add_axis("cell", ["A", "B", "C"])
    return daf.set_vector("cell", "years", np.array([2, 4, 9], np.int64))


def test_a_read_only_computation_on_a_view():
    view = pydaf.viewer(_cells(), axes=[("cell", "@ cell [ years < 9 ]")], data=[(("cell", "age"), ": years")])
    assert mean_age(view) == 3.0
    with pytest.raises(pydaf.DafContractError) as raised:
        mean_age(pydaf.viewer(_cells(), data=[(("cell", "age"), ": years"), (("cell", "batch"), ": years")]))
    assert "unexpected type: Int64\ninstead of type: String\nfor the input vector: batch\nof the axis: cell\n" \
           "for the computation: tests.test_computations.mean_age\non the daf data: cells!.view" \
           in str(raised.value), str(raised.value)


def test_the_computation_receives_a_contract_daf_and_restores_nothing():
    seen = []

    @computation(MEAN_AGE)
    def spy(daf: pydaf.DafReader) -> None:
        seen.append(daf)
        daf.get_vector("cell", "age")

    view = pydaf.viewer(_cells(), data=[(("cell", "age"), ": years")])
    spy(view)
    assert isinstance(seen[-1], ContractReader) and seen[-1].name.endswith(".for.spy")
    daf = _cells().set_vector("cell", "age", [1, 2, 3])
    spy(daf)
    assert isinstance(seen[-1], ContractDaf)
    os.environ["DAF_ENFORCE_CONTRACTS"] = "false"  # (the fixture restores it)
    spy(daf)
    assert seen[-1] is daf


def test_a_computation_on_a_chain_writes_the_top(tmp_path):
    base = _single_inputs(pydaf.H5df(tmp_path / "base.h5df", "w", name="base!"))
    top = pydaf.MemoryDaf(name="top!")
    chain = pydaf.chain_writer([base.read_only(), top], name="chain!")
    BUILDERS["single"]()(chain, 0.5)
    assert float(top.get_scalar("quality")) == 0.5 and not base.has_scalar("quality")
    with pytest.raises(pydaf.DafContractError) as raised:
        BUILDERS["single"]()(chain, 0.5)
    assert "pre-existing CreatedOutput scalar: quality\nfor the computation: Main.single\non the daf data: chain!" \
           in str(raised.value)
    base.close()


def test_a_computation_on_an_h5df_file(tmp_path):
    path = tmp_path / "cells.h5df"
    with pydaf.H5df(path, "w", name="file!") as daf:
        BUILDERS["single"]()(_single_inputs(daf), 0.25)
    assert float(pydaf.open_daf(str(path)).get_scalar("quality")) == 0.25


def test_overwrite_is_read_from_the_call_or_the_default(new_daf):
    cross = BUILDERS["cross"]()
    first, second = new_daf("first!"), new_daf("second!")
    first.set_scalar("version", "0.0").set_scalar("quality", 0.0)
    second.set_scalar("quality", 1.0).set_scalar("version", "1.0")
    with pytest.raises(pydaf.DafContractError, match="pre-existing CreatedOutput scalar: quality"):
        cross(first, second=second)
    cross(first, second=second, overwrite=True)
    assert float(first.get_scalar("quality")) == 1.0 and second.get_scalar("version") == "0.0"
    with pytest.raises(pydaf.DafTypeError, match="non-Bool overwrite keyword parameter type: str"):
        cross(first, second=second, overwrite="yes")

    @computation(Contract(data=[("x", (CreatedOutput, "Int64", "X."))]))
    def always(daf: pydaf.DafWriter, overwrite: bool = True) -> None:
        daf.set_scalar("x", 1, overwrite=overwrite)

    daf = new_daf("x!").set_scalar("x", 0)
    always(daf)  # (the default overwrite=True lets the contract accept the existing output, as Julia passes it)
    assert int(daf.get_scalar("x")) == 1


def test_a_failing_computation_is_not_verified_and_its_error_is_kept():
    @computation(MEAN_AGE)
    def failing(daf: pydaf.DafReader) -> None:
        raise RuntimeError("failed before reading its inputs")

    with pytest.raises(RuntimeError, match="failed before reading its inputs"):
        failing(_cells().set_vector("cell", "age", [1, 2, 3]))


def test_an_unused_required_input_is_reported_after_the_call():
    @computation(MEAN_AGE)
    def lazy(daf: pydaf.DafReader) -> None:
        daf.axis_length("cell")

    with pytest.raises(pydaf.DafContractError) as raised:
        lazy(_cells().set_vector("cell", "age", [1, 2, 3]))
    assert "unused RequiredInput vector: age\nof the axis: cell\nof the computation: " \
           "tests.test_computations.test_an_unused_required_input_is_reported_after_the_call.<locals>.lazy\n" \
           "on the daf data: cells!" in str(raised.value), str(raised.value)


def test_a_failing_computation_in_an_adapter_copies_nothing_back():
    daf = _cells()
    with pytest.raises(pydaf.DafContractError, match="pre-existing CreatedOutput scalar: quality"):
        with adapter(daf, input_axes=[("cell", "="), ("gene", "=")], input_data=[(("cell", "gene", "UMIs"), "=")],
                     output_data=[("QUALITY", ". quality"), (("cell", "TAG"), ": tag")]) as adapted:
            adapted.add_axis("gene", ["X"]).set_matrix("cell", "gene", "UMIs", np.ones((3, 1), np.uint8))
            adapted.set_vector("cell", "tag", ["a", "b", "c"])
            BUILDERS["single"]()(adapted, 1.0)  # (runs)
            BUILDERS["single"]()(adapted, 2.0)  # (refuses: quality exists now)
    assert not daf.has_scalar("QUALITY") and not daf.has_vector("cell", "TAG") and not daf.has_axis("gene")
    with adapter(daf, input_data=[(("cell", "gene", "UMIs"), "=")], output_data=[("QUALITY", ". quality")],
                 output_axes=[("cell", "=")]) as adapted:
        adapted.add_axis("gene", ["X"]).set_matrix("cell", "gene", "UMIs", np.ones((3, 1), np.uint8))
        BUILDERS["single"]()(adapted, 1.0)
    assert float(daf.get_scalar("QUALITY")) == 1.0 and not daf.has_axis("gene")


def test_named_contracts_find_their_parameter_positional_or_keyword(new_daf):
    cross = BUILDERS["cross"]()
    first, second = new_daf("first!"), new_daf("second!")
    first.set_scalar("version", "0.0")
    second.set_scalar("quality", 1.0)

    @computation(Contract(data=[("version", (RequiredInput, str, "V."))]),
                 Contract(name="other", data=[("copy", (CreatedOutput, str, "C."))]))
    def copy_version(daf: pydaf.DafReader, other: pydaf.DafWriter) -> None:
        other.set_scalar("copy", daf.get_scalar("version"))

    copy_version(first, second)
    assert second.get_scalar("copy") == "0.0"
    cross(first, second=second)
    with pytest.raises(TypeError):
        cross(first)  # (Python's own error for a missing argument)
    with pytest.raises(pydaf.DafTypeError, match="not a daf data set: None\nfor the parameter: second"):
        cross(first, second=None)


def test_decoration_errors():
    with pytest.raises(pydaf.DafValueError, match="at most one of 2 contracts can be an unnamed parameter"):
        computation(Contract(), Contract())
    with pytest.raises(pydaf.DafValueError, match="too many contracts: 4"):
        computation(*[Contract(name=f"d{index}") for index in range(4)])
    with pytest.raises(pydaf.DafTypeError, match="not a Contract"):
        computation("Contract()")  # type: ignore[arg-type]
    with pytest.raises(pydaf.DafValueError) as raised:
        @computation(Contract(), Contract(name="second"))
        @in_main
        def no_second(daf: pydaf.DafReader) -> None:
            pass
    assert str(raised.value) == "missing daf keyword parameter: second\nof the computation: Main.no_second\n" \
                                "(its parameters: daf)"
    with pytest.raises(pydaf.DafValueError) as raised:
        @computation(Contract())
        @in_main
        def no_third(daf: pydaf.DafReader) -> None:
            """{CONTRACT3}"""
    assert str(raised.value).startswith("no third contract associated with: Main.no_third\nuse: @computation "
                                        "Contract(...) Contract(...) Contract(...) function Main.no_third(...)\n")


def test_function_contract_and_function_default_errors():
    cross = BUILDERS["cross"]()
    assert function_contract(cross, 1).name == "second"
    with pytest.raises(pydaf.DafValueError) as raised:
        function_contract(cross, 2)
    assert str(raised.value) == "no contract with index: 2\nfor the function: Main.cross\n" \
                                "(it has 2 contracts: indices 0 to 1)"
    with pytest.raises(pydaf.DafValueError, match="it has no contract: it is @documented"):
        function_contract(BUILDERS["none"]())
    with pytest.raises(pydaf.DafValueError) as raised:
        function_default(BUILDERS["not_computation"](), "x")
    assert str(raised.value).startswith("not a @documented function: Main.not_computation\n")
    assert function_default(cross, "overwrite") is False


def test_placeholders_are_filled_indented_and_other_braces_are_kept():
    @documented
    def padded(values: list, *, pad: str = "-", width: int = 3) -> dict:
        """Pad each value to {DEFAULT.width} characters with {DEFAULT.pad} (returns {"value": padded}).

        Example:
            >>> {"a": 1}
            {'a': 1}
        """
        return {value: value.ljust(width, pad) for value in values}

    assert inspect.getdoc(padded) == """Pad each value to `3` characters with `"-"` (returns {"value": padded}).

Example:
    >>> {"a": 1}
    {'a': 1}"""

    @computation(Contract(name="second", data=[("x", (CreatedOutput, "Int64", "The x\nover two lines."))]),
                 Contract(data=[("y", (RequiredInput, "Float32", "The y."))]))
    def two(first: pydaf.DafReader, *, second: pydaf.DafWriter) -> None:
        """Two.

        Input:
            {CONTRACT2}

        Output:
            {CONTRACT1}
        """

    assert inspect.getdoc(two) == """Two.

Input:
    ## Inputs

    ### Scalars

    **y**::Float32 (required): The y.

Output:
    ## Outputs

    ### Scalars

    **x**::Int64 (created): The x
    over two lines."""


def test_an_empty_contract_leaves_no_empty_paragraph():
    @computation(Contract())
    def nothing(daf: pydaf.DafReader) -> None:
        """Title.

        {CONTRACT}

        End."""

    assert nothing.__doc__ == "Title.\n\n        End."
    with pytest.raises(pydaf.DafValueError) as raised:
        @documented
        @in_main
        def no_contract(x: int = 1) -> None:
            """{CONTRACT}"""
    assert str(raised.value).startswith("no contract associated with: Main.no_contract\nuse: @computation "
                                        "Contract(...) function Main.no_contract(...)\n")


def test_placeholder_objects_spell_the_placeholders():
    assert (CONTRACT, CONTRACT1, CONTRACT2, CONTRACT3) == ("{CONTRACT}", "{CONTRACT1}", "{CONTRACT2}", "{CONTRACT3}")
    assert DEFAULT.window == "{DEFAULT.window}" and repr(DEFAULT) == "DEFAULT"

    def built(daf: pydaf.DafReader, window: int = 5) -> None:
        pass

    built.__doc__ = f"Window {DEFAULT.window}.\n\n{CONTRACT}"
    built = computation(Contract(is_relaxed=True))(built)
    assert built.__doc__.startswith("Window `5`.\n\n## Inputs\n\nAdditional inputs")


def test_the_docs_page_runs():
    if not PAGE.exists():
        pytest.fail(f"missing {PAGE}")
    failures, tests = doctest.testfile(str(PAGE), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert tests > 0 and failures == 0
