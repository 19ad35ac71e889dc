"""Contracts (pydaf.composition.contracts): enforcement on every backend and through read-only wrappers, views and
chains; the switch (``DAF_ENFORCE_CONTRACTS``); merging; the generated documentation."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import pydaf
from pydaf.composition.contracts import (
    Contract,
    ContractDaf,
    ContractReader,
    CreatedOutput,
    GuaranteedOutput,
    OptionalInput,
    OptionalOutput,
    RequiredInput,
    contract_documentation,
    contract_type_text,
    contractor,
    contracts_enforced,
    verify_input,
    verify_output,
)
from pydaf.errors import DafAppendOnlyError, DafContractError, DafReadOnlyError, DafTypeError, DafValueError
from pydaf.storage_types import StorageFloat, StorageInteger

COMPUTATION = "tests.compute"
PAGE = Path(__file__).resolve().parent.parent / "docs" / "contracts.md"


@pytest.fixture(autouse=True)
def enforce(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAF_ENFORCE_CONTRACTS", "true")


def _filled(daf: pydaf.DafWriter) -> pydaf.DafWriter:
    daf.set_scalar("organism", "human")
    daf.add_axis("cell", ["A", "B", "C"]).add_axis("gene", ["X", "Y"])
    daf.set_vector("cell", "age", np.array([3, 5, 7], dtype=np.int64))
    daf.set_vector("cell", "type", ["T", "B", "T"])
    daf.set_matrix("cell", "gene", "UMIs", np.arange(6, dtype=np.float32).reshape(3, 2))
    return daf


#: How the data set a computation gets is made from a backend's data set: itself, read-only, a view, write and read
#: chains.
WRAPPERS: dict[str, Callable[[pydaf.DafWriter], pydaf.DafReader]] = {
    "plain": lambda daf: daf,
    "read_only": lambda daf: daf.read_only(name="reader!"),
    "view": lambda daf: pydaf.viewer(daf, name="view!", axes=[pydaf.VIEW_ALL_AXES], data=pydaf.VIEW_ALL_DATA),
    "chain_writer": lambda daf: pydaf.chain_writer([daf, pydaf.MemoryDaf(name="top!")], name="chain!"),
    "chain_reader": lambda daf: pydaf.chain_reader([pydaf.MemoryDaf(name="first!"), daf], name="chain!"),
}


@pytest.fixture(params=list(WRAPPERS), ids=str)
def wrapped(request: pytest.FixtureRequest, backend, tmp_path) -> pydaf.DafReader:
    """A filled data set of each backend, as each wrapper shows it."""
    return WRAPPERS[request.param](_filled(backend.new(tmp_path, "cells!")))


AGE_CONTRACT = Contract(axes=[("cell", (RequiredInput, "The cells."))],
                        data=[(("cell", "age"), (RequiredInput, StorageInteger, "The age of each cell."))])


def _message(problem: str, daf: pydaf.DafReader, *, of: bool = False) -> str:
    return f"{problem}\n{'of' if of else 'for'} the computation: {COMPUTATION}\non the daf data: {daf.name}"


def test_contractor_wraps_every_backend_and_wrapper(wrapped):
    contract_daf = contractor(COMPUTATION, AGE_CONTRACT, wrapped)
    expected_type = ContractDaf if isinstance(wrapped, pydaf.DafWriter) else ContractReader
    assert type(contract_daf) is expected_type
    assert isinstance(contract_daf, pydaf.DafWriter) == isinstance(wrapped, pydaf.DafWriter)
    assert contract_daf.name == f"{wrapped.name}.for.compute" or contract_daf.name.startswith(
        f"{wrapped.name}.for.compute#")
    assert repr(contract_daf) == pydaf.brief(contract_daf) == f"Contract {wrapped._type_text()} {contract_daf.name}"
    assert contract_daf.description() == wrapped.description()


def test_complete_computation_passes(wrapped):
    contract_daf = contractor(COMPUTATION, AGE_CONTRACT, wrapped)
    verify_input(contract_daf)
    assert contract_daf.axis_length("cell") == 3
    assert contract_daf["@ cell : age >> Sum"] == 15
    verify_output(contract_daf)


def test_missing_required_input(wrapped):
    contract = AGE_CONTRACT | Contract(data=[(("cell", "batch"), (RequiredInput, str, "The batch of each cell."))])
    with pytest.raises(DafContractError) as error:
        verify_input(contractor(COMPUTATION, contract, wrapped))
    assert _message("missing input vector: batch\nof the axis: cell\nwith element type: String", wrapped) in str(
        error.value)


def test_wrong_input_type(wrapped):
    contract = Contract(axes=[("cell", (RequiredInput, "The cells."))],
                        data=[(("cell", "age"), (RequiredInput, StorageFloat, "The age of each cell."))])
    with pytest.raises(DafContractError) as error:
        verify_input(contractor(COMPUTATION, contract, wrapped))
    assert _message("unexpected type: Int64\ninstead of type: Union{Float32, Float64}\nfor the input vector: age\n"
                    "of the axis: "
                    "cell", wrapped) in str(error.value)


def test_undeclared_access(wrapped):
    contract_daf = contractor(COMPUTATION, AGE_CONTRACT, wrapped)
    with pytest.raises(DafContractError) as error:
        contract_daf.get_vector("cell", "type")
    assert _message("accessing non-contract vector: type\nof the axis: cell", wrapped) in str(error.value)
    with pytest.raises(DafContractError) as error:
        contract_daf.get_scalar("organism")
    assert _message("accessing non-contract scalar: organism", wrapped) in str(error.value)
    with pytest.raises(DafContractError) as error:
        contract_daf["@ cell @ gene :: UMIs"]
    assert _message("accessing non-contract axis: gene", wrapped) in str(error.value)
    with pytest.raises(DafContractError) as error:
        contract_daf.get_pd_matrix("gene", "cell", "UMIs")
    assert "accessing non-contract axis: gene" in str(error.value)


def test_unused_required_input(wrapped):
    contract_daf = contractor(COMPUTATION, AGE_CONTRACT, wrapped)
    assert contract_daf.axis_length("cell") == 3
    with pytest.raises(DafContractError) as error:
        verify_output(contract_daf)
    assert _message("unused RequiredInput vector: age\nof the axis: cell", wrapped, of=True) in str(error.value)


def test_output_not_created(backend, tmp_path):
    daf = _filled(backend.new(tmp_path, "cells!"))
    for wrapper in ("plain", "chain_writer"):
        target = WRAPPERS[wrapper](daf) if wrapper == "plain" else pydaf.chain_writer(
            [daf.read_only(), pydaf.MemoryDaf(name="top!")], name="chain!")
        contract = AGE_CONTRACT | Contract(data=[(f"total_{wrapper}", (CreatedOutput, "Int64", "The total age."))])
        contract_daf = contractor(COMPUTATION, contract, target)
        verify_input(contract_daf)
        total = int(contract_daf.get_vector("cell", "age").sum())
        with pytest.raises(DafContractError) as error:
            verify_output(contract_daf)
        assert _message(f"missing output scalar: total_{wrapper}\nwith type: Int64", target) in str(error.value)
        contract_daf.set_scalar(f"total_{wrapper}", total)
        verify_output(contract_daf)
        assert target.get_scalar(f"total_{wrapper}") == 15
    assert daf.get_scalar("total_plain") == 15 and not daf.has_scalar("total_chain_writer")


def test_modifying_an_input_changes_nothing(backend, tmp_path):
    daf = _filled(backend.new(tmp_path, "cells!"))
    contract_daf = contractor(COMPUTATION, AGE_CONTRACT, daf)
    with pytest.raises(DafContractError if backend.rewrites else DafAppendOnlyError) as error:
        contract_daf.set_vector("cell", "age", [1, 2, 3], overwrite=True)
    if backend.rewrites:  # (append-only storage refuses any overwrite first)
        assert _message("modifying RequiredInput vector: age\nof the axis: cell", daf) in str(error.value)
    with pytest.raises(DafContractError, match="modifying RequiredInput axis: cell"):
        contract_daf.delete_axis("cell")
    assert daf.get_vector("cell", "age").tolist() == [3, 5, 7]


def test_read_only_contract_has_no_writes(backend, tmp_path):
    contract_daf = contractor(COMPUTATION, AGE_CONTRACT, _filled(backend.new(tmp_path, "cells!")).read_only())
    assert not hasattr(contract_daf, "set_vector")
    with pytest.raises(DafReadOnlyError):
        contract_daf.set_vector("cell", "age", [1, 2, 3], overwrite=True)


@pytest.mark.parametrize("value", [None, "", "false", "0", "no", "F"])
def test_not_enforced_returns_the_data_set(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("DAF_ENFORCE_CONTRACTS", raising=False)
    else:
        monkeypatch.setenv("DAF_ENFORCE_CONTRACTS", value)
    daf = pydaf.MemoryDaf(name="plain!")
    assert not contracts_enforced()
    assert contractor(COMPUTATION, AGE_CONTRACT, daf) is daf
    verify_input(daf)  # (no-ops on a plain data set)
    verify_output(daf)


@pytest.mark.parametrize("value", ["t", "True", "YES", "1", "y"])
def test_enforced_values(monkeypatch, value):
    monkeypatch.setenv("DAF_ENFORCE_CONTRACTS", value)
    assert contracts_enforced()


def test_invalid_enforcement_value(monkeypatch):
    monkeypatch.setenv("DAF_ENFORCE_CONTRACTS", "on")
    with pytest.raises(DafValueError, match="DAF_ENFORCE_CONTRACTS\nvalue: 'on'"):
        contractor(COMPUTATION, AGE_CONTRACT, pydaf.MemoryDaf())


def test_cached_query_counts_as_access():
    daf = _filled(pydaf.MemoryDaf(name="cached!"))
    assert daf.get_query("@ cell : age >> Sum") == 15  # cached by the base, through the shared cache
    contract_daf = contractor(COMPUTATION, AGE_CONTRACT, daf)
    assert contract_daf.get_query("@ cell : age >> Sum") == 15
    verify_output(contract_daf)
    empty = contractor(COMPUTATION, Contract(), daf)
    with pytest.raises(DafContractError, match=r"accessing non-contract (axis: cell|vector: age)"):
        empty.get_query("@ cell : age >> Sum")


def test_shares_the_state_of_the_data_set():
    daf = _filled(pydaf.MemoryDaf(name="shared!"))
    contract = AGE_CONTRACT | Contract(data=[(("cell", "score"), (CreatedOutput, "Float64", "A score."))])
    contract_daf = contractor(COMPUTATION, contract, daf)
    assert contract_daf.vector_version_counter("cell", "age") == daf.vector_version_counter("cell", "age")
    contract_daf.set_vector("cell", "score", [0.5, 1.5, 2.5])
    assert daf.get_vector("cell", "score").tolist() == [0.5, 1.5, 2.5]
    assert contract_daf.vector_version_counter("cell", "score") == daf.vector_version_counter("cell", "score") == 1
    assert contract_daf.cache is daf.cache
    contract_daf.close()
    assert contract_daf.closed and not daf.closed
    with pytest.raises(pydaf.DafClosedError):
        contract_daf.axis_length("cell")
    assert daf.axis_length("cell") == 3


def test_read_only_of_a_contract_keeps_tracking():
    daf = _filled(pydaf.MemoryDaf(name="tracked!"))
    contract_daf = contractor(COMPUTATION, AGE_CONTRACT, daf)
    reader = contract_daf.read_only()
    assert isinstance(reader, ContractReader) and reader.read_only() is reader
    with pytest.raises(DafContractError, match="accessing non-contract scalar: organism"):
        reader.get_scalar("organism")
    assert reader.get_vector("cell", "age").sum() == 15 and reader.axis_length("cell") == 3
    verify_output(contract_daf)


def test_nested_contracts_track_both():
    daf = _filled(pydaf.MemoryDaf(name="nested!"))
    outer_contract = AGE_CONTRACT | Contract(data=[("organism", (RequiredInput, str, "The organism."))])
    inner = contractor("tests.inner", AGE_CONTRACT, daf)
    outer = contractor("tests.outer", outer_contract, inner)
    assert pydaf.brief(outer) == f"Contract MemoryDaf {outer.name}"
    with pytest.raises(DafContractError, match=re.escape("accessing non-contract scalar: organism\nfor the "
                                                         "computation: tests.inner")):
        outer.get_scalar("organism")
    assert outer.get_vector("cell", "age").sum() == 15
    verify_output(inner)


def test_tensors_expand_when_their_axis_is_added():
    daf = pydaf.MemoryDaf(name="tensors!").add_axis("cell", ["A", "B"]).add_axis("gene", ["X", "Y", "Z"])
    contract = Contract(axes=[("cell", (RequiredInput, "Cells.")), ("gene", (RequiredInput, "Genes.")),
                              ("batch", (CreatedOutput, "Batches."))],
                        data=[(("batch", "cell", "gene", "is_high"), (CreatedOutput, bool, "High per batch."))])
    contract_daf = contractor(COMPUTATION, contract, daf)
    verify_input(contract_daf)
    contract_daf.add_axis("batch", ["U", "V"])
    contract_daf.set_matrix("cell", "gene", "U_is_high", np.zeros((2, 3), dtype=bool))
    with pytest.raises(DafContractError, match="missing output matrix: V_is_high\nof the rows axis: cell\nand the "
                                               "columns axis: gene\nwith element type: Bool"):
        verify_output(contract_daf)
    contract_daf.set_matrix("gene", "cell", "V_is_high", np.ones((3, 2), dtype=bool))
    verify_output(contract_daf)


def test_contract_axes_must_be_listed():
    daf = _filled(pydaf.MemoryDaf(name="axes!"))
    contract = Contract(axes=[("cell", (RequiredInput, "Cells."))],
                        data=[(("cell", "gene", "UMIs"), (RequiredInput, "StorageReal", "UMIs."))])
    with pytest.raises(DafContractError, match="non-contract axis: gene\nfor the columns of the RequiredInput matrix: "
                                               "UMIs\nwith the rows axis: cell"):
        contractor(COMPUTATION, contract, daf)
    contract = Contract(axes=[("cell", (OptionalInput, "Cells.")), ("gene", (RequiredInput, "Genes."))],
                        data=[(("cell", "gene", "UMIs"), (RequiredInput, "StorageReal", "UMIs."))])
    with pytest.raises(DafContractError, match=re.escape("incompatible OptionalInput axis: cell\nfor the rows of the "
                                                         "RequiredInput matrix: UMIs\nwith the columns axis: gene\n"
                                                         "for the computation: tests.compute\non the daf data: "
                                                         "axes!.for.compute")):
        contractor(COMPUTATION, contract, daf)
    with pytest.raises(DafContractError, match="invalid AxisKey: \\(\"cell\", \"age\"\\)"):
        contractor(COMPUTATION, Contract(axes=[(("cell", "age"), (RequiredInput, "Int64", "Ages."))]), daf)


# Merging (Julia's |>).

_EXPECTATIONS = (RequiredInput, OptionalInput, CreatedOutput, GuaranteedOutput, OptionalOutput)
_MERGED = {(RequiredInput, RequiredInput): RequiredInput, (RequiredInput, OptionalInput): RequiredInput,
           (OptionalInput, RequiredInput): RequiredInput, (OptionalInput, OptionalInput): OptionalInput,
           (CreatedOutput, RequiredInput): CreatedOutput, (CreatedOutput, OptionalInput): CreatedOutput,
           (GuaranteedOutput, RequiredInput): GuaranteedOutput, (GuaranteedOutput, OptionalInput): GuaranteedOutput,
           (OptionalOutput, OptionalInput): OptionalOutput}


@pytest.mark.parametrize("left", _EXPECTATIONS, ids=str)
@pytest.mark.parametrize("right", _EXPECTATIONS, ids=str)
def test_merge_expectations(left, right):
    merged = _MERGED.get((left, right))
    left_contract, right_contract = (Contract(axes={"cell": (expectation, "Cells.")}) for expectation in (left, right))
    if merged is None:
        with pytest.raises(DafContractError, match=f"incompatible expectation: {left}\nand expectation: {right}\n"
                                                   "for the contracts axis: cell"):
            _ = left_contract | right_contract
    else:
        assert (left_contract | right_contract).axes == [("cell", (merged, "Cells."))]


def test_merge_names_relaxed_types_and_descriptions():
    left = Contract(name="first", data=[("x", (RequiredInput, "Integer", "X.")), ("y", (RequiredInput, str, "Y."))])
    right = Contract(name="second", is_relaxed=True, data=[("x", (OptionalInput, StorageInteger, "X."))])
    merged = left | right
    assert (merged.name, merged.is_relaxed, merged.axes) == ("first_second", True, None)
    assert [(key, spec[0], contract_type_text(spec[1])) for key, spec in merged.data] == [
        ("x", RequiredInput, "Union{Int16, Int32, Int64, Int8, UInt16, UInt32, UInt64, UInt8}"),
        ("y", RequiredInput, "String")]
    with pytest.raises(DafContractError, match="incompatible type: Int64\nand type: Float32\nfor the contracts data: "
                                               "\\(\"cell\", \"age\"\\)"):
        _ = Contract(data=[(("cell", "age"), (RequiredInput, np.int64, "A."))]) | Contract(
            data=[(("cell", "age"), (RequiredInput, np.float32, "A."))])
    with pytest.raises(DafContractError, match="different description for the axis: cell"):
        _ = Contract(axes={"cell": (RequiredInput, "A.")}) | Contract(axes={"cell": (RequiredInput, "B.")})
    assert (Contract() | Contract()).axes is None


def test_types():
    # Julia's storage unions are plain globals, not type aliases: Julia shows them expanded, in its union order.
    assert contract_type_text(StorageInteger) == "Union{Int16, Int32, Int64, Int8, UInt16, UInt32, UInt64, UInt8}"
    assert contract_type_text("StorageUnsigned") == contract_type_text("Union{UInt8, UInt16, UInt32, UInt64}") == \
        "Union{UInt16, UInt32, UInt64, UInt8}"
    assert contract_type_text((np.uint8, np.uint16)) == "Union{UInt16, UInt8}"
    assert contract_type_text((str, np.float64)) == "Union{Float64, String}"
    assert contract_type_text("Union{Integer, Int8}") == "Integer"
    assert contract_type_text(float) == "Float64" and contract_type_text(np.dtype("int16")) == "Int16"
    assert contract_type_text(pydaf.StorageScalar) == contract_type_text("StorageScalarBase") == \
        "Union{Bool, Float32, Float64, Int16, Int32, Int64, Int8, UInt16, UInt32, UInt64, UInt8, AbstractString}"
    assert contract_type_text(np.int8 | np.int16) == "Union{Int16, Int8}"
    with pytest.raises(DafTypeError, match="unknown contract type: Complex"):
        Contract(data=[("x", (RequiredInput, "Complex", "X."))])
    with pytest.raises(DafTypeError):
        Contract(data=[("x", (RequiredInput, np.complex64, "X."))])
    with pytest.raises(DafTypeError, match="unknown contract type: None"):
        Contract(data=[("x", (RequiredInput, None, "X."))])
    with pytest.raises(DafValueError, match="expected a ContractExpectation"):
        Contract(axes=[("cell", ("Required", "Cells."))])


def test_scalar_types_are_checked():
    daf = pydaf.MemoryDaf(name="scalars!").set_scalar("count", np.uint8(3)).set_scalar("ratio", 0.5)
    contract = Contract(data=[("count", (RequiredInput, StorageInteger, "A count.")),
                              ("ratio", (RequiredInput, "Integer", "A ratio."))])
    with pytest.raises(DafContractError, match="unexpected type: Float64\ninstead of type: Integer\nfor the input "
                                               "scalar: ratio"):
        verify_input(contractor(COMPUTATION, contract, daf))


# Documentation.


def test_documentation_of_every_section():
    contract = Contract(
        axes=[("cell", (RequiredInput, "The cells.")), ("type", (CreatedOutput, "The types.")),
              ("gene", (GuaranteedOutput, "Not listed, as in Julia."))],
        data=[("version", (OptionalInput, str, "\n    The version.\n      Indented.\n")),
              (("cell", "type"), (CreatedOutput, str, "The type of each cell.")),
              (("cell", "gene", "UMIs"), (RequiredInput, "StorageFloat", "The UMIs.")),
              (("type", "cell", "gene", "score"), (OptionalOutput, "Float32", "Scores per type."))])
    assert contract_documentation(contract) == """\
## Inputs

### Scalars

**version**::String (optional): The version.
  Indented.

### Axes

**cell** (required): The cells.

### Matrices

**cell, gene @ UMIs**::Union{Float32, Float64} (required): The UMIs.

## Outputs

### Axes

**type** (created): The types.

### Vectors

**cell @ type**::String (created): The type of each cell.

### Tensors

**type; cell, gene @ score**::Float32 (optional): Scores per type.
"""


def test_documentation_of_relaxed_contracts():
    # Julia's quirk, kept: the outputs header of a relaxed contract depends on whether there were inputs.
    assert contract_documentation(Contract(is_relaxed=True)) == """\
## Inputs

Additional inputs may be used depending on the parameter(s).

## Outputs

Additional outputs may be created depending on the parameter(s).
"""
    text = contract_documentation(Contract(is_relaxed=True, axes={"cell": (RequiredInput, "Cells.")}))
    assert text.endswith("**cell** (required): Cells.\n\nAdditional inputs may be used depending on the parameter(s)."
                         "\n\nAdditional outputs may be created depending on the parameter(s).\n")
    assert contract_documentation(Contract()) == ""


def test_the_page_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.DOTALL)
    assert len(blocks) == 1
    exec(compile(blocks[0], str(PAGE), "exec"), {})
    printed = capsys.readouterr().out
    assert printed.startswith("accessing non-contract scalar: organism\nfor the computation: example.total\n"
                              "on the daf data: cells!\n## Inputs\n")
    assert "**total_age**::Int64 (created): The sum of the ages." in printed


def test_views_and_chains_of_a_contract_data_set_are_checked():
    daf = _filled(pydaf.MemoryDaf(name="outer!"))
    # (a chain reads every axis of its members to check they agree, so the contract lists them all)
    contract_daf = contractor(COMPUTATION, AGE_CONTRACT | Contract(axes={"gene": (OptionalInput, "Genes.")}), daf)
    view = pydaf.viewer(contract_daf, axes=[("cell", "=")], data=[(("cell", "age"), "="), (("cell", "type"), "=")])
    with pytest.raises(DafContractError, match="accessing non-contract vector: type"):
        view.get_vector("cell", "type")
    chain = pydaf.chain_reader([pydaf.MemoryDaf(name="empty!"), contract_daf], name="outer-chain!")
    with pytest.raises(DafContractError, match="accessing non-contract scalar: organism"):
        chain.get_scalar("organism")
    assert chain.get_vector("cell", "age").tolist() == [3, 5, 7]  # read through the chain: counts as used
    verify_output(contract_daf)
