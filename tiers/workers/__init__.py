"""Worker processes for the daemon's background model work, at a lower CPU priority.

- :mod:`tiers.workers.pool`: starting, supervising and restarting them, and handing them
  requests;
- :mod:`tiers.workers.process`: what runs in one (``python -m tiers.workers.process``);
- :mod:`tiers.core.wire`: the frames between the two;
- :mod:`tiers.workers.embedder`: the embedder that keeps queries in the daemon and sends
  documents to the workers (which run the model by onnxruntime alone,
  :mod:`tiers.semantic.embedding.onnx`, loaded in a fraction of a second).
"""
