"""``python -m opgen`` runs the command line (see :mod:`opgen.cli`)."""

import sys

from .cli import main

sys.exit(main())
