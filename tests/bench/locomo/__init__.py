"""Evidence recall on LoCoMo through the gRPC API (``python -m tests.bench.locomo``, ``make
bench-recall``): the run (:mod:`.run`), the dataset's reader (:mod:`.data`), the metrics, the
tables, the context mode, the digests, and leave-one-conversation-out (``python -m
tests.bench.locomo.loco``).
"""
