"""Whether torch can give a live MemPool's cached blocks back, which is what the kit would
need to match PyTorch's reservation where a port leaves warm-up blocks cached before a
capture (hf32-qwen3). Prints what each call left reserved. No kit, PyTorch's allocator."""
import torch

MIB = 1 << 20


def reserved():
    return torch.cuda.memory_reserved() // MIB


print("torch", torch.__version__)
print("MemPool has:", [a for a in dir(torch.cuda.MemPool) if not a.startswith("_")])
print("_cuda_emptyCache:", torch._C._cuda_emptyCache.__doc__)
pool = torch.cuda.MemPool()
with torch.cuda.use_mem_pool(pool):
    x = torch.empty(256 * MIB, dtype=torch.uint8, device="cuda")
    del x
    print("cached in the pool, routed:", reserved(), "MiB")
    torch.cuda.empty_cache()
    print("after empty_cache() while routed:", reserved(), "MiB")
torch.cuda.empty_cache()
print("after empty_cache() outside the routing, pool alive:", reserved(), "MiB")
for call in ("torch._C._cuda_emptyCache(pool.id)", "torch.cuda.memory.empty_cache(pool.id)"):
    try:
        eval(call)
        print(f"{call}: {reserved()} MiB")
    except Exception as e:  # noqa: BLE001 - the probe reports whatever the binding says
        print(f"{call}: {type(e).__name__}: {e}")
del pool
torch.cuda.empty_cache()
print("after the pool is destroyed and empty_cache():", reserved(), "MiB")
