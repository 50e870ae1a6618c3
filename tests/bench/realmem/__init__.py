"""Session recall on RealMem through the gRPC API (``python -m tests.bench.realmem``, ``make
bench-recall``): the run (:mod:`.run`), the dataset's reader (:mod:`.data`), the metrics and
the tables.
"""
