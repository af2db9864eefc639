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

def parse_size(size):
    """Bytes from a size's text such as ``"64MiB"``, ``"8 GiB"`` or ``"1.5GiB"``, or from an
    int of bytes: read by the Rust parser ``gnomon export --cap`` reads with, so a size is
    the same at every door. Anything else (``True``, a negative number, digits of another
    script, a size past 64 bits) raises ``ValueError``, in the parser's words."""
    return _native.parse_size(size if isinstance(size, str) else repr(size))


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
