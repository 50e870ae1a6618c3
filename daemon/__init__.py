"""stratad: the daemon (its lifecycle, gRPC services, settings and tools), on top of the
weaver, recall and the tiers. Its client is the package ``stratad_client``
(``daemon/client/``, a distribution of its own); the client's old names under ``daemon``
still import, with a warning, until the next release (:mod:`daemon.moved`)."""

from daemon import moved

moved.install()
