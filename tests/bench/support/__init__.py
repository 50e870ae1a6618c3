"""What the benchmarks share: a throwaway daemon and the figures' JSON (:mod:`.daemon`), what a
daemon records and holds meanwhile (:mod:`.recorders`, :mod:`.sampler`), the load agents'
tallies (:mod:`.tally`), and the recall benchmarks' command line (:mod:`.recall_cli`).
"""
