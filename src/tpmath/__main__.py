"""``python -m tpmath``: see :mod:`tpmath.cli`."""

import sys

from .cli import main

sys.exit(main())
