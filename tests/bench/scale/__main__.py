"""``python -m tests.bench.scale``: runs :mod:`tests.bench.scale.run`."""

import runpy

runpy.run_module("tests.bench.scale.run", run_name="__main__", alter_sys=True)
