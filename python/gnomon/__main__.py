"""``python -m gnomon ARGS``: the installed ``gnomon`` binary, for environments whose
scripts directory is not on PATH."""

import os
import sys

from . import binary

if __name__ == "__main__":
    path = binary()
    os.execv(path, [str(path), *sys.argv[1:]])
