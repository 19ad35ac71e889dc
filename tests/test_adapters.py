"""pydaf.composition.adapters: Julia's ``adapter`` as a ``with`` block (dafpy's form), beyond Julia's recorded case
(which ``test_composition_parity.py`` runs on MemoryDaf and H5df)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import pydaf
from pydaf.composition.adapters import adapter


def _cells(name: str = "cells!") -> pydaf.DafWriter:
    daf = pydaf.MemoryDaf(name=name).add_axis("cell", ["A", "B", "C"])
    return daf.set_vector("cell", "age", np.array([1, 5, 7], np.int64)).set_scalar("INPUT", 1)


def test_renamed_inputs_and_outputs_and_only_the_named_outputs_come_back():
    daf = _cells()
    with adapter(daf, input_data=[("input", ". INPUT"), (("cell", "years"), ": age")],
                 output_data=[("OUTPUT", ". output"), (("cell", "AGE2"), ": doubled")]) as adapted:
        assert adapted.name == "cells!.adapted"
        assert adapted.get_vector("cell", "years").tolist() == [1, 5, 7]
        assert not adapted.has_vector("cell", "age")  # (the view shows only what input_data names)
        adapted.set_scalar("output", int(adapted.get_scalar("input")) + 1)
        adapted.set_vector("cell", "doubled", adapted.get_vector("cell", "years") * 2)
        adapted.set_scalar("scratch", "not copied")
        assert not daf.has_scalar("OUTPUT")  # (writes go to the capture until the block ends)
    assert int(daf.get_scalar("OUTPUT")) == 2
    assert daf.get_vector("cell", "AGE2").tolist() == [2, 10, 14]
    assert daf.scalars_set() == {"INPUT", "OUTPUT"}
    assert daf.vectors_set("cell") == {"age", "AGE2"}


def test_a_failing_computation_copies_nothing_back():
    daf = _cells()
    with pytest.raises(RuntimeError, match="the computation failed"):
        with adapter(daf, input_data=[("input", ". INPUT")], output_data=[("OUTPUT", ". output")]) as adapted:
            adapted.set_scalar("output", 2)
            raise RuntimeError("the computation failed")
    assert daf.scalars_set() == {"INPUT"}


def test_a_daf_error_in_the_block_copies_nothing_back():
    daf = _cells()
    with pytest.raises(pydaf.DafError, match="missing scalar: nothing"):
        with adapter(daf, input_data=[("input", ". INPUT")], output_data=[("OUTPUT", ". output")]) as adapted:
            adapted.set_scalar("output", 2)
            adapted.get_scalar("nothing")
    assert daf.scalars_set() == {"INPUT"}


def test_on_h5df_the_outputs_are_written_to_the_file(tmp_path):
    path = tmp_path / "cells.h5df"
    with pydaf.H5df(path, "w", name="file!") as daf:
        daf.add_axis("cell", ["A", "B"]).set_vector("cell", "age", np.array([3, 4], np.int64))
        with adapter(daf, input_axes=[("obs", "@ cell")], input_data=[(("obs", "x"), "@ cell : age")],
                     output_axes=[("cell", "@ obs")], output_data=[(("cell", "x_squared"), "@ obs : y")]) as adapted:
            assert adapted.axis_vector("obs").tolist() == ["A", "B"]
            adapted.set_vector("obs", "y", adapted.get_vector("obs", "x") ** 2)
    reader = pydaf.open_daf(str(path))
    assert reader.get_vector("cell", "x_squared").tolist() == [9, 16]
    assert reader.vectors_set("cell") == {"age", "x_squared"}


def test_a_subset_view_needs_empty_to_copy_back_into_the_whole_axis():
    daf = _cells()
    old = dict(input_axes=[("cell", "@ cell [ age > 1 ]")], input_data=[(("cell", "age"), "=")],
               output_data=[(("cell", "old"), ": is_old")])
    with pytest.raises(pydaf.DafError) as raised:
        with adapter(daf, **old) as adapted:
            adapted.set_vector("cell", "is_old", np.ones(adapted.axis_length("cell"), np.bool_))
    assert "cell" in str(raised.value) and "empty" in str(raised.value), str(raised.value)
    assert not daf.has_vector("cell", "old")
    with adapter(daf, **old, empty=[(("cell", "old"), False)]) as adapted:
        assert adapted.axis_vector("cell").tolist() == ["B", "C"]
        adapted.set_vector("cell", "is_old", np.ones(adapted.axis_length("cell"), np.bool_))
    assert daf.get_vector("cell", "old").tolist() == [False, True, True]


def test_an_existing_output_is_replaced_only_with_overwrite():
    daf = _cells().set_scalar("OUTPUT", 0)

    def run(**kwargs) -> None:
        with adapter(daf, input_data=[("input", ". INPUT")], output_data=[("OUTPUT", ". output")],
                     **kwargs) as adapted:
            adapted.set_scalar("output", 5)

    with pytest.raises(pydaf.DafExistsError, match="OUTPUT"):
        run()
    assert int(daf.get_scalar("OUTPUT")) == 0
    run(overwrite=True)
    assert int(daf.get_scalar("OUTPUT")) == 5


def test_a_custom_capture_receives_the_writes(tmp_path):
    daf = _cells()
    captures = []

    def capture(*, name: str) -> pydaf.DafWriter:
        captures.append(pydaf.H5df(tmp_path / "capture.h5df", "w", name=name))
        return captures[-1]

    with adapter(daf, input_data=[("input", ". INPUT")], output_data=[("OUTPUT", ". output")],
                 capture=capture) as adapted:
        adapted.set_scalar("output", 3)
    (captured,) = captures
    assert captured.name == "cells!.capture"
    assert int(captured.get_scalar("output")) == 3 and int(daf.get_scalar("OUTPUT")) == 3
    captured.close()


def test_a_no_op_adapter_is_refused():
    daf = _cells()
    with pytest.raises(pydaf.DafValueError) as raised:
        with adapter(daf):
            pass
    assert str(raised.value).startswith("no-op adapter: .adapter\n"), str(raised.value)
    assert "for the daf data: cells!" in str(raised.value)


def test_the_signature_is_dafpys_with_julias_name():
    parameters = inspect.signature(adapter).parameters
    assert list(parameters) == ["daf", "name", "input_axes", "input_data", "capture", "output_axes", "output_data",
                                "empty", "relayout", "overwrite"]
    assert all(parameter.kind is inspect.Parameter.KEYWORD_ONLY for parameter in list(parameters.values())[1:])
    assert parameters["capture"].default is pydaf.MemoryDaf and parameters["relayout"].default is True
    assert parameters["name"].default == ".adapter" and parameters["overwrite"].default is False
