"""The vector store's process (tiers.semantic.vectors.child.main) serving a probe store:
``python -m tests.support.probe_vectors``. The probe's ``ids`` answers with what the call ran
with in that process: its thread's rest share and how many nice steps it runs below the
process's main thread."""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from tiers.core.priority import rest_share
from tiers.core.wire import run_child
from tiers.semantic.vectors.child import main as child


class ProbeStore:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def ids(self, flt: Any, limit: int = 1000) -> list[str]:
        mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        below = mine - os.getpriority(os.PRIO_PROCESS, os.getpid())
        return [str(rest_share()), str(below)]

    def close(self) -> None:
        pass


if __name__ == "__main__":
    child.STORES["probe"] = ProbeStore
    sys.exit(run_child(child.serve, die_with_thread=True))
