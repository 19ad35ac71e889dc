"""The errors of the Julia bridge (defined, with every other pydaf error, in :mod:`pydaf.errors`)."""

from __future__ import annotations

from ..errors import DafJuliaError, DafJuliaUnavailableError, DafJuliaVersionError

__all__ = ["DafJuliaError", "DafJuliaUnavailableError", "DafJuliaVersionError"]
