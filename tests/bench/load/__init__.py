"""Mixed load of 32 agents (``python -m tests.bench.load``, ``make bench-load``): the run
(:mod:`.run`), its table (:mod:`.report`) and its watchers (:mod:`.watch`).
"""
