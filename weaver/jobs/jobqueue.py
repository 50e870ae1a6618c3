"""The weaver's line of jobs: what its one worker thread runs, in order.

Only :data:`weaver.jobs.kinds.Job` values get in (anything else raises
:class:`weaver.jobs.kinds.UnknownJob` at the door); :meth:`JobQueue.stop` puts the mark that
ends the worker. The worker is the only consumer, so the head it sees is the job it gets next:
the index jobs drain the index jobs at the head of the line into one batch that way, and a
consolidation run lets the index jobs in line overtake it between two episodes
(:meth:`JobQueue.take`).
"""

from __future__ import annotations

import queue
from typing import TypeVar

from weaver.jobs.kinds import JOB_TYPES, Job, unknown

J = TypeVar("J", bound=Job)


class JobQueue:
    def __init__(self) -> None:
        self._line: queue.Queue[Job | None] = queue.Queue()  # None stops the worker

    def put(self, job: Job) -> None:
        if not isinstance(job, JOB_TYPES):
            unknown(job)
        self._line.put(job)

    def stop(self) -> None:
        """Queue the mark that ends the worker (after the jobs in line before it)."""
        self._line.put(None)

    def get(self, block: bool = True) -> Job | None:
        """The next job; None: stop. Without ``block``, raises ``queue.Empty`` on an empty
        line."""
        return self._line.get(block)

    def queued(self, kind: type[Job]) -> bool:
        """Whether a job of ``kind`` waits in line."""
        with self._line.mutex:
            return any(isinstance(job, kind) for job in self._line.queue)

    def take_next(self, kind: type[J]) -> J | None:
        """The job at the head of the line if it is a ``kind``, taken out of the line; else
        None, and the line is unchanged. Only the worker calls it."""
        with self._line.mutex:
            head = self._line.queue[0] if self._line.queue else None
        if not isinstance(head, kind):
            return None
        try:
            job = self._line.get_nowait()
        except queue.Empty:
            return None
        assert job is head
        return head

    def take(self, *kinds: type[Job]) -> list[Job]:
        """Every job in line of one of ``kinds``, in order, wherever they stand, taken out of
        the line. Only the worker calls it."""
        with self._line.mutex:
            taken = [job for job in self._line.queue if isinstance(job, kinds)]
            if taken:
                kept = [job for job in self._line.queue if not isinstance(job, kinds)]
                self._line.queue.clear()
                self._line.queue.extend(kept)
                self._line.not_full.notify_all()
        return taken

    def empty(self) -> bool:
        return self._line.empty()

    def kinds(self) -> list[str]:
        """The kinds of the jobs in line, in order (the stop mark left out)."""
        with self._line.mutex:
            return [job.kind for job in self._line.queue if job is not None]
