"""The Memory Weaver's throughput on LoCoMo (``python -m tests.bench.weaver``, part of ``make
bench``): the run (:mod:`.run`), its parts in this process (:mod:`.in_process`) and through a
daemon (:mod:`.daemon`), and their inputs (:mod:`.inputs`).
"""
