"""``python -m tests.bench.locomo``: runs :mod:`tests.bench.locomo.run`."""

import runpy

runpy.run_module("tests.bench.locomo.run", run_name="__main__", alter_sys=True)
