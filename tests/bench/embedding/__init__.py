"""The embedding back-ends: the local ones side by side (``python -m
tests.bench.embedding.backends``), the remote path (``python -m tests.bench.embedding.remote``)
and a query's tokenization beside busy threads (``python -m tests.bench.embedding.tokens``), all
part of ``make bench``.
"""
