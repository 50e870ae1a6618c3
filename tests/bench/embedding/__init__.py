"""The embedding back-ends: the local ones side by side (``python -m
tests.bench.embedding.backends``) and the remote path (``python -m
tests.bench.embedding.remote``), both part of ``make bench``.
"""
