"""``python -m daemon``: the same as ``stratad``."""

import sys

from daemon.cli import main

sys.exit(main())
