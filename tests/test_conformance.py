"""The conformance suite (:mod:`pydaf.testing`) run on every backend of ``conftest.BACKENDS``, once per backend."""

from __future__ import annotations

from pydaf.testing import DafConformance

from .conftest import (
    BACKENDS,
    CHAIN,
    FILES,
    H5DF,
    H5DF_GROUP,
    MEMORY,
    ZARR,
    ZARR_ZIP,
    ZARR_ZIP_GROUP,
    ZIP,
    ZIP_GROUP,
    ChainBackend,
)


class TestMemoryDaf(DafConformance):
    backend = MEMORY


class TestH5df(DafConformance):
    backend = H5DF


class TestH5dfGroup(DafConformance):
    backend = H5DF_GROUP


class TestFilesDaf(DafConformance):
    backend = FILES


class TestZarrDaf(DafConformance):
    backend = ZARR


class TestZarrDafZip(DafConformance):
    backend = ZARR_ZIP


class TestZarrDafZipGroup(DafConformance):
    backend = ZARR_ZIP_GROUP


class TestZipDaf(DafConformance):
    backend = ZIP


class TestZipDafGroup(DafConformance):
    backend = ZIP_GROUP


class TestWriteChain(DafConformance):
    """A write chain over memory members behaves like the data set it writes into."""

    backend = CHAIN


class TestWriteChainOverH5df(DafConformance):
    """A write chain whose last member is persistent: writes reach the file, and read back through the chain."""

    backend = ChainBackend(H5DF)


def test_every_backend_runs_the_suite():
    # (all the suite's subclasses, at any depth, that name a backend: other test files add intermediate bases)
    classes, found = [DafConformance], set()
    while classes:
        subclasses = classes.pop().__subclasses__()
        classes.extend(subclasses)
        found.update(cls.backend for cls in subclasses if hasattr(cls, "backend"))
    assert set(BACKENDS) <= found
