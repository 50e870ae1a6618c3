"""The vector index: requests while it builds (``python -m tests.bench.index.build``, ``make
bench-build``) and the index stage's throughput (``python -m tests.bench.index.stage``, ``make
bench-index``).
"""
