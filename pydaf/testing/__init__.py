"""Test helpers shipped with pydaf, so a new storage backend (in pydaf or outside it) is tested like the built-in ones:
:class:`DafConformance`, the suite every backend must pass, parametrised by the backend's :class:`DafBackend` hooks.
They need ``pytest`` (the ``test`` extra).

Example:
    >>> import pydaf
    >>> from pydaf.testing import DafBackend, DafConformance
    >>> class Memory(DafBackend):
    ...     name = "memory"
    ...     def new(self, directory, name):
    ...         return pydaf.MemoryDaf(name=name)
    >>> class TestMemoryDaf(DafConformance):  # collected by pytest in a test module
    ...     backend = Memory()
    >>> TestMemoryDaf.backend.new(None, "x!").name
    'x!'
"""

import pytest

# Under pytest, the suite's asserts show the compared values, as in a test module (a no-op outside pytest).
pytest.register_assert_rewrite("pydaf.testing.conformance")

from .backend import DafBackend  # noqa: E402 - after registering the rewrite
from .conformance import INDEX_DTYPES, NUMBER_DTYPES, DafConformance, is_file_map, sample_values  # noqa: E402

__all__ = ["INDEX_DTYPES", "NUMBER_DTYPES", "DafBackend", "DafConformance", "is_file_map", "sample_values"]
