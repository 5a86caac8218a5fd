"""The progress bar of a long command: tqdm's on a terminal, whole lines in a file.

A bar redrawn with carriage returns is what a terminal wants. Written to a file (a job's log,
``nohup``, CI) every redraw lands on one endless line. There the bar writes its state as lines
of their own instead, as the crawl's progress line does: when the command moves on to another
phase, every :data:`LOG_INTERVAL` seconds within one, and the last state.
"""

from __future__ import annotations

import math
import re
import sys
from time import monotonic
from typing import IO, Any

__all__ = ["LOG_INTERVAL", "progress_bar"]

#: seconds between two progress lines in a file
LOG_INTERVAL = 10.0

#: the description a bar's line starts with ("reading: 40%|..."): the command's phase
_PHASE = re.compile(r"([^\W\d][\w ]*): ")


class _Lines:
    """A text stream for tqdm that writes a redraw of the bar as a line: the first of each
    phase (the bar's description), then one every :data:`LOG_INTERVAL` seconds, and the last
    state, when the bar closes."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.encoding = getattr(stream, "encoding", None) or "utf-8"
        self._phase: str | None = None
        self._written_at = -math.inf
        self._written: str | None = None
        self._held: str | None = None

    def write(self, text: str) -> None:
        line = text.replace("\r", "").strip()  # a redraw is "\r" and the bar, padded
        if not line:  # the newline a closed bar ends with, after its last state
            if "\n" in text and self._held is not None:
                self._write(self._held)
            return
        phase = match.group(1) if (match := _PHASE.match(line)) else None
        if phase != self._phase or monotonic() - self._written_at >= LOG_INTERVAL:
            self._phase = phase
            self._write(line)
        elif line != self._written:
            self._held = line

    def _write(self, line: str) -> None:
        self.stream.write(line + "\n")
        self._written_at = monotonic()
        self._written, self._held = line, None

    def flush(self) -> None:
        self.stream.flush()


def progress_bar(stream: IO[str] | None = None, **options: Any) -> Any:
    """A tqdm bar on ``stream`` (stderr), in lines unless it is a terminal; ``options`` are
    tqdm's (``unit``, ``total``, ...)."""
    from tqdm import tqdm

    stream = stream or sys.stderr
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        return tqdm(file=stream, **{"dynamic_ncols": True, "mininterval": 0.5, **options})
    return tqdm(file=_Lines(stream), **{"mininterval": 0.5, **options})
