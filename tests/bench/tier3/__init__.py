"""Tier 3's embedded engine alone: query latency (``python -m tests.bench.tier3.query``, part of
``make bench``) on points mixed from LoCoMo (:mod:`.points`).
"""
