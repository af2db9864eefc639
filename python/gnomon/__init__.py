"""Gnomon for port teams: record kernel images, export PyTorch graphs as a core, qualify it.

The format, exporter and validator are Gnomon's Rust crates (``gnomon._native``); the
``gnomon`` binary installed with this package runs ``gnomon qualify``.
"""

import json
import os
import shutil
import sysconfig
from pathlib import Path

from . import _native

__all__ = ["validate", "binary", "parse_size"]
__version__ = _native.__version__

_UNITS = {"": 1, "B": 1, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40,
          "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}


def parse_size(size):
    """Bytes from an int or a string such as ``"64MiB"`` or ``"8 GiB"``."""
    if isinstance(size, int):
        return size
    text = str(size).strip().upper().replace(" ", "")
    number = text.rstrip("KMGTIB")
    unit = text[len(number):]
    if not number.isdigit() or unit not in _UNITS:
        raise ValueError(f"not a size: {size!r} (write bytes, or e.g. 64MiB, 8GiB)")
    return int(number) * _UNITS[unit]


def validate(core):
    """Checks every rule of the format on the core at ``core``, file hashes included, and
    returns its account (templates, nodes, buffers, modules, stored bytes...). Raises
    ``RuntimeError`` with the validator's words when the core is refused."""
    return json.loads(_native.validate(os.fspath(core)))


def binary():
    """The ``gnomon`` executable installed with this package."""
    here = Path(sysconfig.get_path("scripts")) / "gnomon"
    found = here if here.is_file() else shutil.which("gnomon")
    if found is None:
        raise FileNotFoundError("the gnomon binary is not installed beside this package")
    return Path(found)
