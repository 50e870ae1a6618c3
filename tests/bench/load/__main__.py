"""``python -m tests.bench.load``: runs :mod:`tests.bench.load.run`."""

import runpy

runpy.run_module("tests.bench.load.run", run_name="__main__", alter_sys=True)
