"""The conformance suite (tests/conformance.py) run on every backend."""

from __future__ import annotations

import pytest

import pydaf

from .conformance import DafConformance


class TestMemoryDaf(DafConformance):
    @pytest.fixture
    def daf(self) -> pydaf.DafWriter:
        return pydaf.MemoryDaf(name="memory!")


class TestH5df(DafConformance):
    @pytest.fixture
    def daf(self, tmp_path) -> pydaf.DafWriter:
        return pydaf.H5df(tmp_path / "test.h5df", "w", name="h5df!")

    def reopen(self, daf: pydaf.DafWriter) -> pydaf.DafWriter:
        """Close the HDF5 file and open it again, so everything is read back from disk."""
        path = daf.complete_path()
        daf.format.file.close()
        return pydaf.H5df(path, "r+", name=daf.name)


class TestH5dfGroup(TestH5df):
    @pytest.fixture
    def daf(self, tmp_path) -> pydaf.DafWriter:
        pydaf.H5df(f"{tmp_path}/test.h5dfs#/other", "w").set_scalar("other", 1)
        return pydaf.H5df(f"{tmp_path}/test.h5dfs#/nested/group", "w", name="group!")

    def reopen(self, daf: pydaf.DafWriter) -> pydaf.DafWriter:
        reopened = super().reopen(daf)
        assert pydaf.H5df(str(reopened.complete_path()).replace("#/nested/group", "#/other"),
                          "r").get_scalar("other") == 1
        return reopened


class TestFilesDaf(DafConformance):
    @pytest.fixture
    def daf(self, tmp_path) -> pydaf.DafWriter:
        return pydaf.FilesDaf(tmp_path / "test.daf", "w", name="files!")

    def reopen(self, daf: pydaf.DafWriter) -> pydaf.DafWriter:
        """Open the directory again, so everything is read back from its files."""
        return pydaf.FilesDaf(daf.complete_path(), "r+", name=daf.name)


class TestWriteChain(DafConformance):
    """A write chain over an empty base behaves like the data set it writes into."""

    @pytest.fixture
    def daf(self, tmp_path) -> pydaf.DafWriter:
        base = pydaf.MemoryDaf(name="base!")
        return pydaf.chain_writer([base, pydaf.H5df(tmp_path / "top.h5df", "w", name="top!")], name="chain!")
