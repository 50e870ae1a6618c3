"""Tests of the keyed records: documents, anchors, pins, access counts (``tiers.keyed``)."""
