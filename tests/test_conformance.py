"""The conformance suite (:mod:`pydaf.testing`) run on every backend of ``conftest.BACKENDS``, once per backend."""

from __future__ import annotations

from pydaf.testing import DafConformance

from .conftest import BACKENDS, MEMORY, ChainBackend, FilesBackend, H5dfBackend, H5dfGroupBackend


class TestMemoryDaf(DafConformance):
    backend = MEMORY


class TestH5df(DafConformance):
    backend = H5dfBackend()


class TestH5dfGroup(DafConformance):
    backend = H5dfGroupBackend()


class TestFilesDaf(DafConformance):
    backend = FilesBackend()


class TestWriteChain(DafConformance):
    """A write chain over memory members behaves like the data set it writes into."""

    backend = ChainBackend(MEMORY)


class TestWriteChainOverH5df(DafConformance):
    """A write chain whose last member is persistent: writes reach the file, and read back through the chain."""

    backend = ChainBackend(H5dfBackend())


def test_every_backend_runs_the_suite():
    tested = {type(cls.backend).__name__ + str(cls.backend) for cls in DafConformance.__subclasses__()}
    assert {type(backend).__name__ + str(backend) for backend in BACKENDS} <= tested
