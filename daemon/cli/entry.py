"""The console scripts ``stratad`` and ``weaverctl``: they run the daemon's command-line tools,
which need the daemon's dependencies (those of the distribution ``stratad``). Installed
without them (``--no-deps``, or a dependency removed since), they say so and what to install,
instead of a traceback: ``stratad`` at once, ``weaverctl`` at the command that needs them
(``export``; its others need the client alone)."""

from __future__ import annotations

import importlib
import sys

PROJECT = ("daemon", "tiers", "weaver", "recall")
EXIT_MISSING = 1


def _main(module: str, command: str) -> int:
    try:
        return int(importlib.import_module(module).main())
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if not missing or missing in PROJECT:
            raise
        print(
            f"{command}: the daemon's dependencies are not installed (no module {missing!r}); "
            "install them with: pip install stratad",
            file=sys.stderr,
        )
        return EXIT_MISSING


def stratad() -> int:
    """``stratad``: :func:`daemon.cli.stratad.main`."""
    return _main("daemon.cli.stratad", "stratad")


def weaverctl() -> int:
    """``weaverctl``: :func:`daemon.cli.weaverctl.main`."""
    return _main("daemon.cli.weaverctl", "weaverctl")
