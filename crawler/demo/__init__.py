"""The bundled demo site that ``neardup demo`` serves on 127.0.0.1 (see build.py for its story).

>>> sorted(load_truth()["pages"]["/mirror/walks/wenlow-tarn.html"].items())[:2]
[('change', 'byte-identical copy'), ('containment_in_original', 1.0)]
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["SITE_DIR", "TRUTH_PATH", "load_truth"]

#: the directory to serve: every file under it is a page of the site
SITE_DIR = Path(__file__).resolve().parent / "site"
#: what each path of the site is (kind, original, exact resemblance); not served
TRUTH_PATH = Path(__file__).resolve().parent / "TRUTH.json"


def load_truth() -> dict[str, Any]:
    """TRUTH.json as a dict; its ``pages`` maps a URL path (``/walks/``) to its entry."""
    data: dict[str, Any] = json.loads(TRUTH_PATH.read_text(encoding="utf-8"))
    return data
