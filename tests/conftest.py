from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# CI machines are shared 2-core boxes: bounded examples, no per-example deadline.
settings.register_profile(
    "ci", max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
