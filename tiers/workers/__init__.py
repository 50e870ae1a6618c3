"""Worker processes for the daemon's background model work, at a lower CPU priority.

- :mod:`tiers.workers.pool`: starting, supervising and restarting them, and handing them
  requests;
- :mod:`tiers.workers.process`: what runs in one (``python -m tiers.workers.process``);
- :mod:`tiers.workers.wire`: the frames between the two;
- :mod:`tiers.workers.embedder`: the embedder that keeps queries in the daemon and sends
  documents to the workers;
- :mod:`tiers.workers.onnx_model`: the model run by onnxruntime alone, which a worker loads in
  a fraction of a second.
"""
