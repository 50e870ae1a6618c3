"""The tests' kit, each helper defined once: polling (:mod:`tests.support.polling`), daemons in
this process or in a subprocess (:mod:`tests.support.daemons`), shared settings
(:mod:`tests.support.settings`), a refused call's status (:mod:`tests.support.rpc`), the
conversations tests write and consolidate (:mod:`tests.support.conversations`), a process
held still (:mod:`tests.support.stopping`), and the embedded vector store's index build held
back (:mod:`tests.support.builds`, imported from there)."""

from tests.support.conversations import MAY, consolidate, talk
from tests.support.daemons import ROOT, ProcessDaemon, ThreadDaemon, daemon_env, weaverctl
from tests.support.polling import wait_indexed, wait_until
from tests.support.rpc import code
from tests.support.settings import MODEL_CACHE, QUIET, QUIET_ENV
from tests.support.stopping import hold_still

__all__ = [
    "MAY",
    "MODEL_CACHE",
    "QUIET",
    "QUIET_ENV",
    "ROOT",
    "ProcessDaemon",
    "ThreadDaemon",
    "code",
    "consolidate",
    "daemon_env",
    "hold_still",
    "talk",
    "wait_indexed",
    "wait_until",
    "weaverctl",
]
