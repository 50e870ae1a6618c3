"""A store of a million points or more (``python -m tests.bench.scale``, ``make bench-scale``):
the run (:mod:`.run`), its parallel fill (:mod:`.fill`) and what it reads off the daemon
(:mod:`.readings`).
"""
