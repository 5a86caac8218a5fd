"""The storage modules' doctests (pytest's --doctest-modules covers only tests/ and dedup/)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["storage.records", "storage.lmdb_env", "storage.log"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0
    assert result.failed == 0
