"""The Memory Weaver: consolidates journal episodes into the semantic store (Tier 3).

``runner`` owns the worker thread (index stage, scheduled and on-demand runs), ``index`` and
``consolidate`` are the two stages, ``extractors`` the local and LLM back-ends, ``rebuild``
re-derives Tier 3 from the journal and stored extractions. ``weaverctl``, a client of the
daemon, is :mod:`daemon.cli.weaverctl`.
"""
