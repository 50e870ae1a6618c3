"""``python -m daemon``: the same as ``stratad``."""

import sys

from daemon.cli.stratad import main

sys.exit(main())
