"""``python -m tests.bench.updates``: runs :mod:`tests.bench.updates.run`."""

import runpy

runpy.run_module("tests.bench.updates.run", run_name="__main__", alter_sys=True)
