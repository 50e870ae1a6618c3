"""stratad: the daemon (its lifecycle, gRPC services, settings and clients), on top of the
weaver, recall and the tiers."""
