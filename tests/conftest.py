"""Settings shared by every test."""

from __future__ import annotations

from hypothesis import settings

# Time limits belong to benchmarks, not tests: on a loaded 2-core machine a property test's
# example can take longer than Hypothesis's default 200 ms deadline without anything being wrong.
settings.register_profile("neardup", deadline=None)
settings.load_profile("neardup")
