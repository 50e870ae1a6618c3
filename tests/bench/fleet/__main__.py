"""``python -m tests.bench.fleet``: runs :mod:`tests.bench.fleet.run`."""

import runpy

runpy.run_module("tests.bench.fleet.run", run_name="__main__", alter_sys=True)
