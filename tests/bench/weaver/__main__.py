"""``python -m tests.bench.weaver``: runs :mod:`tests.bench.weaver.run`."""

import runpy

runpy.run_module("tests.bench.weaver.run", run_name="__main__", alter_sys=True)
