"""The benchmarks: each prints its figures (and writes them with ``--json PATH``), run by a make
target or as ``python -m tests.bench.<name>``, never by ``make test`` (the ``test_*.py`` here
test the benchmarks' own code). A benchmark of several modules has a folder (its run in
``run.py``, started by the folder's ``__main__.py``); :mod:`tests.bench.support` holds what
they share. ``docs/benchmarks.md`` records what they measured.
"""
