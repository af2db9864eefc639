"""Whether torch.cuda.empty_cache() gives PyTorch's default pool's cached blocks back while
the thread is routed to a MemPool (as the kit's arena routes it), and once it is not. No
kit, PyTorch's allocator. Prints what stayed reserved after each call."""
import torch

MIB = 1 << 20


def reserved():
    return torch.cuda.memory_reserved() // MIB


print("torch", torch.__version__)
pool = torch.cuda.MemPool()
x = torch.empty(256 * MIB, dtype=torch.uint8, device="cuda")
del x
print("cached in the default pool:", reserved(), "MiB")
with torch.cuda.use_mem_pool(pool):
    torch.cuda.empty_cache()
    print("after empty_cache() while routed to a pool:", reserved(), "MiB")
torch.cuda.empty_cache()
print("after empty_cache() with no pool routed to:", reserved(), "MiB")
