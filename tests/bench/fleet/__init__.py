"""A fleet of agents at a human pace (``python -m tests.bench.fleet``, ``make bench-fleet``): the
run (:mod:`.run`), its probes of live sessions (:mod:`.live`) and its verdict (:mod:`.report`).
"""
