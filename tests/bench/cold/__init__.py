"""Users whose data is cold: a graph not in memory (``python -m tests.bench.cold.scopes``, ``make
bench-cold``) and a page cache without them (``python -m tests.bench.cold.disk``, ``make
bench-cold-disk``).
"""
