"""Loading the scripts under ``benchmarks/`` as modules, to run them end to end on small data in tests."""

from __future__ import annotations

import importlib.util
import pathlib
import sys
from types import ModuleType


def load_benchmark(name: str) -> ModuleType:
    """The module of ``benchmarks/<name>.py``."""
    script = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / f"{name}.py"
    if str(script.parent) not in sys.path:  # (as when run as a script: its helpers, e.g. child_runs, import)
        sys.path.append(str(script.parent))
    spec = importlib.util.spec_from_file_location(name, script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, as importlib's recipe does (dataclasses look their module up while being defined).
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
