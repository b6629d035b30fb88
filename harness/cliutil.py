"""Pieces shared by the command-line tools (dare-eval, dare-train, dare-leaderboard)."""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

import yaml


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2): the usage block would bury the message."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        raise SystemExit(2)


def parse_assignment(item: str) -> tuple[str, Any]:
    """``"key=value"`` -> (key, value parsed as a YAML scalar: ``0.7`` float, ``true`` bool, else text).

    Raises ValueError naming the item when it is not KEY=VALUE.
    """
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"{item!r} is not KEY=VALUE")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key, value
