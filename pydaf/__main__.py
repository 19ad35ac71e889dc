"""``python -m pydaf``: the ``pydaf`` command line."""

import sys

from .cli import main

sys.exit(main())
