"""Updates: does Recall tell the current truth (``python -m tests.bench.updates``, ``make
bench-updates``): the run (:mod:`.run`) and its scenarios (:mod:`.data`).
"""
