"""The vector index build, beside the weaver's worker (:class:`IndexBuilds`, owned by
:class:`weaver.jobs.runner.Weaver`).

``request`` starts the vector store's index build and flush on a thread of its own, unless one
is running: it neither waits behind index jobs (under a backlog it never ran) nor holds them up
(the embedded store builds in a child process and records the writes made meanwhile:
:mod:`tiers.semantic.vectors.edge.generations`). The index jobs and the runs count the points
they write (:meth:`IndexBuilds.wrote`); a build is worth it once some were written, or after
the index was lost.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from tiers.core.priority import BACKGROUND_NICE, lower_this_thread, resting
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import IndexBuildCancelled
from tiers.space import DiskFull

log = logging.getLogger("strata.weaver")
# The flush after a build round rests this many times as long as each shard's flush took, so
# that the event loop gets the interpreter between them (a shard's flush holds it).
FLUSH_REST = 1.0


class IndexBuilds:
    """The build's state and its thread. ``failed`` hears why a build failed (the weaver's
    ``last_error``)."""

    def __init__(
        self, semantic: SemanticStore, stopping: threading.Event, failed: Callable[[str], None]
    ) -> None:
        self._semantic = semantic
        self._stopping = stopping
        self._failed = failed
        self.points_since_optimize = 0
        self._index_lost = False  # set by index_lost(): the next build runs regardless
        self._optimizer: threading.Thread | None = None
        self._optimizer_lock = threading.Lock()

    def wrote(self, points: int) -> None:
        """``points`` were written to the vector store since the last build."""
        self.points_since_optimize += points

    def request(self) -> None:
        """Build the vector index in the background, unless a build is running."""
        with self._optimizer_lock:
            if self._stopping.is_set():
                return
            if self._optimizer is not None and self._optimizer.is_alive():
                return
            self._optimizer = threading.Thread(
                target=self._optimize, name="vectors-optimize", daemon=True
            )
            self._optimizer.start()

    def index_lost(self) -> None:
        """The vector store was rewritten without its index (a Forget's purge): the next
        scheduled build runs even if no point was written since."""
        self._index_lost = True

    def _optimize(self) -> None:
        lower_this_thread(BACKGROUND_NICE)
        new_points = self.points_since_optimize
        lost, self._index_lost = self._index_lost, False
        if not (new_points or lost) or not self._semantic.ready:
            self._index_lost = self._index_lost or lost
            return
        began = time.monotonic()
        try:
            self._semantic.check_space("an index build of the vector store")
            _embedder, vectors = self._semantic.wait_ready(0)
            vectors.optimize()
            with resting(FLUSH_REST):
                vectors.flush()
        except IndexBuildCancelled as exc:  # a purge rewrote the store: build again later
            self._index_lost = True
            log.info("vectors.build_cancelled", extra={"fields": {"reason": str(exc)}})
            return
        except DiskFull as exc:  # no build below the disk's reserve: the next one, later
            self._index_lost = self._index_lost or lost
            log.warning("vectors.build_deferred", extra={"fields": {"reason": str(exc)}})
            return
        except Exception as exc:
            if not self._stopping.is_set():
                self._failed(f"optimize: {exc}")
                log.exception("weaver.job_failed", extra={"fields": {"job": "optimize"}})
            return
        # Points written during the build count towards the next one.
        self.points_since_optimize -= new_points
        log.info(
            "vectors.optimized",
            extra={
                "fields": {
                    "new_points": new_points,
                    "ms": round((time.monotonic() - began) * 1000, 1),
                }
            },
        )
