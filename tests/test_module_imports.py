"""pytest imports every module of crawler/, storage/ and dedup/ to collect their doctests.

So importing one must do nothing but define things: no Twisted reactor installed (the crawl
picks its reactor later, once per process), no network, no threads left running.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_PROBE = """
import importlib, json, pkgutil, socket, sys, threading

def refuse(*args, **kwargs):
    raise OSError("network used at import")

socket.socket.connect = socket.socket.connect_ex = refuse
socket.create_connection = socket.getaddrinfo = refuse
imported = []
for package in ("crawler", "storage", "dedup"):
    for info in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
        if not info.name.endswith(".__main__"):  # pytest does not collect __main__.py either
            importlib.import_module(info.name)
            imported.append(info.name)
print(json.dumps({
    "imported": imported,
    "reactor": "twisted.internet.reactor" in sys.modules,
    "threads": [t.name for t in threading.enumerate() if t is not threading.main_thread()],
}))
"""


def test_every_module_imports_without_side_effects():
    done = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, capture_output=True, check=False,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert "crawler.demo.build" in seen["imported"] and "storage.store" in seen["imported"]
    assert seen["reactor"] is False
    assert seen["threads"] == []
