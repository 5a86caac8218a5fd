"""Helper processes that must not outlive the process that started them."""

from __future__ import annotations

import signal

__all__ = ["die_with_parent"]


def die_with_parent() -> None:
    """Ask Linux to kill this process when its parent dies: a SIGKILLed crawl or re-cluster
    leaves no worker behind, holding a store's writer lock or burning a core. Elsewhere the
    worker's closed pipe ends it."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
