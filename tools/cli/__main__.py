"""``python -m tools.cli``: the ``amem`` command."""

import sys

from .main import main

sys.exit(main())
