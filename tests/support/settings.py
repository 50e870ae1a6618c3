"""Settings the tests share: the model cache, and a weaver that runs no scheduled
consolidation during a test."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

# The ONNX export of the model, made once and shared by the tests' daemons (an export costs
# about 3 s and 170 MB; concurrent exports are safe: tiers.semantic.embedding).
MODEL_CACHE = Path(tempfile.gettempdir()) / f"strata-test-models-{os.getuid()}"

# The [weaver] section of a daemon whose consolidation runs only when a test asks (RunNow);
# indexing still runs within seconds. ``start_daemon(weaver=QUIET)``, or with more settings
# ``weaver={**QUIET, ...}``.
QUIET: dict[str, Any] = {"interval_seconds": 3600, "first_run_delay_seconds": 0}
# The same for a stratad subprocess, as settings of ``spawn``/``ProcessDaemon``/``daemon_env``:
# ``spawn(data_dir, **QUIET_ENV)``.
QUIET_ENV: dict[str, str] = {f"weaver__{key}": str(value) for key, value in QUIET.items()}
