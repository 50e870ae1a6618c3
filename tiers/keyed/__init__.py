"""Records an agent addresses by key: documents, session anchors, pins and access counts."""
