"""The lengths of the long reliability tests (threads, processes, kills, fuzzing), scaled by one environment variable.

``PYDAF_SOAK=1`` runs them at the full length the reliability work is judged by (60 s of 8 reader threads and a
writer per backend, 100 kills per backend, ...); the default, 0.1, keeps the ordinary test run within minutes while
each test still reproduces the defect it guards against (its ``minimum``).
"""

from __future__ import annotations

import os

FACTOR = float(os.environ.get("PYDAF_SOAK", "0.1"))


def soak(full: float, minimum: float) -> float:
    """A soak length: ``full`` at ``PYDAF_SOAK=1``, ``full * PYDAF_SOAK`` otherwise, never below ``minimum``."""
    return max(minimum, full * FACTOR)
