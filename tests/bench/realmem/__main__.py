"""``python -m tests.bench.realmem``: runs :mod:`tests.bench.realmem.run`."""

import runpy

runpy.run_module("tests.bench.realmem.run", run_name="__main__", alter_sys=True)
