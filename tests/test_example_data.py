"""The example data sets shipped in the package: the archive against Julia's text files, the types and layouts, and the
packaging (their descriptions are checked against Julia's records in ``test_julia_examples.py``)."""

from __future__ import annotations

import fnmatch
import importlib.util
import pathlib
import tomllib

import numpy as np
import pytest

import pydaf

from .julia_examples import EXAMPLE_DATA, needs_fixtures

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _generator():
    spec = importlib.util.spec_from_file_location("make_example_data", ROOT / "tools" / "make_example_data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@needs_fixtures
def test_the_archive_holds_julias_text_files_decoded():
    expected = _generator().example_arrays(EXAMPLE_DATA)
    with np.load(ROOT / "pydaf" / "data" / "example_data.npz", allow_pickle=False) as archive:
        assert sorted(archive.files) == sorted(expected)
        for key, values in expected.items():
            stored = archive[key]
            assert stored.dtype == values.dtype and stored.shape == values.shape, key
            assert np.array_equal(stored, values), key
            assert stored.flags.f_contiguous, key


def test_float32_parsing_rounds_once():
    nearest = _generator().nearest_float32
    # 1 + 2^-24 + 2^-60 lies just above the midpoint of two Float32s: rounding to Float64 first lands on the
    # midpoint, which then rounds (to even) down; Julia's single rounding goes up.
    text = "1.000000059604644776151635980939"
    assert np.float32(float(text)) == np.float32(1.0)
    assert nearest(text) == np.nextafter(np.float32(1.0), np.float32(2.0))
    assert nearest("0.1") == np.float32(0.1) and nearest("61.0") == np.float32(61)


def test_types_layouts_and_names():
    cells = pydaf.example_cells_daf(name="my cells!")
    assert cells.name == "my cells!" and isinstance(cells, pydaf.MemoryDaf)
    assert cells.get_vector("donor", "age").dtype == np.uint32
    assert cells.get_vector("gene", "is_lateral").dtype == np.bool_
    assert cells.get_vector("cell", "donor").dtype == object
    assert cells.get_matrix("gene", "cell", "UMIs", relayout=False).dtype == np.uint8
    assert cells.has_matrix("cell", "gene", "UMIs", relayout=False)
    metacells = pydaf.example_metacells_daf()
    assert not metacells.has_matrix("metacell", "gene", "fraction", relayout=False)
    assert metacells.get_matrix("gene", "metacell", "fraction").dtype == np.float32
    assert (metacells.get_vector("cell", "metacell") == "").sum() > 0  # cells in no metacell
    chain = pydaf.example_chain_daf(name="my chain!")
    assert chain.name == "my chain!" and isinstance(chain, pydaf.DafWriter)
    assert float(chain.get_query("@ cell @ gene :: UMIs >> Sum")) == float(
        cells.get_matrix("cell", "gene", "UMIs").sum(dtype=np.int64))


def test_each_call_builds_an_independent_data_set():
    first, second = pydaf.example_cells_daf(), pydaf.example_cells_daf()
    first.set_vector("donor", "age", np.zeros(95, dtype=np.uint32), overwrite=True)
    first.delete_matrix("gene", "cell", "UMIs")
    assert second.get_vector("donor", "age").max() > 0 and second.has_matrix("gene", "cell", "UMIs")
    with pytest.raises(ValueError, match="read-only"):
        second.get_vector("donor", "age")[0] = 1
    chain = pydaf.example_chain_daf()
    chain.set_vector("cell", "score", np.ones(856))
    assert not pydaf.example_chain_daf().has_vector("cell", "score")


def test_the_package_data_is_declared_for_installs():
    """``pip install`` ships what ``tool.setuptools.package-data`` matches: every file of ``pydaf/data``."""
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["pydaf"]
    files = [path.relative_to(ROOT / "pydaf").as_posix() for path in (ROOT / "pydaf" / "data").iterdir()]
    assert "data/example_data.npz" in files
    assert all(any(fnmatch.fnmatch(file, pattern) for pattern in patterns) for file in files), (files, patterns)
