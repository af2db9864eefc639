"""A port run as under the kit's MemPool routing, where torch.cuda.empty_cache() does nothing,
but on PyTorch's own allocator: `python3 without_empty_cache.py PORT.py ARGS...` (with
`--arena none`). If its max_memory_reserved() rises to the kit's, the cache that
torch.cuda.graph() empties before each capture is the difference."""
import inspect
import runpy
import sys

import torch

print("torch.cuda.graph.__enter__ empties the cache:",
      "empty_cache" in inspect.getsource(torch.cuda.graph.__enter__), file=sys.stderr)
torch.cuda.empty_cache = lambda: None
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
