"""A tensor-parallel step of two ranks whose all-reduce is a custom one-shot kernel over
the peer's buffers in the kit's arena: each rank's process maps its peer's arena at a
window (`gnomon.torch.join_ranks`), and the kernel reads the peer's partial sum and signal
flag through it, as vLLM's and SGLang's custom all-reduce kernels read their peers' IPC
buffers. Both ranks run on GPU 0 unless told otherwise, as two processes.

    python -m gnomon.torch python/ports/tp.py --out DIR [--device-per-rank]

Rank 0 starts rank 1 (a fresh `python -m gnomon.torch` process) and both export their
cores to DIR/rank-R: a rank set for `gnomon qualify DIR --ranks-on-one-gpu`. The step is
a row-parallel layer: each rank multiplies its slice of the input by its slice of the
weights (cuBLAS), the all-reduce (Triton) sums the two partials, and each rank finishes
with its own GELU. A peer whose flag does not rise within five seconds is marked in
`missing` instead of waited for forever.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import torch
import triton
import triton.language as tl

import gnomon.torch as gt

WORLD, BATCH, HIDDEN, BLOCK = 2, 16, 4096, 1024
TIMEOUT_NS = 5_000_000_000


@triton.jit
def _now():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


# Unspecialised in `rank`: Triton would compile rank 1 (an integer equal to 1) as a
# constant, and the ranks' modules would differ.
@triton.jit(do_not_specialize=["rank"])
def allreduce_two(out, own, peer_at, own_flag, peer_flag_at, missing, n, rank, timeout_ns, BLOCK: tl.constexpr):
    """out = this rank's partial + its peer's: the same bits on both ranks (a float sum of
    two is commutative). The partials were written by the kernel before this one; this
    rank's flag says so. The peer's partial and flag come as addresses in this rank's
    window onto the peer's arena."""
    peer = peer_at.to(tl.pointer_type(tl.float32))
    peer_flag = peer_flag_at.to(tl.pointer_type(tl.int32))
    if tl.program_id(0) == 0:
        tl.atomic_xchg(own_flag, 1, sem="release", scope="sys")
    start = _now()
    arrived = tl.atomic_add(peer_flag, 0, sem="acquire", scope="sys")
    while (arrived == 0) & (_now() - start < timeout_ns):
        arrived = tl.atomic_add(peer_flag, 0, sem="acquire", scope="sys")
    if arrived == 0:
        tl.atomic_or(missing, 1 << (1 - rank))
    else:
        at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mine = tl.load(own + at, mask=at < n)
        theirs = tl.load(peer + at, mask=at < n, volatile=True)
        tl.store(out + at, mine + theirs, mask=at < n)


def slices(rank):
    """Rank `rank`'s slice of the input and of the weights: seeded by rank, so every rank
    can make every slice (for the reference)."""
    g = torch.Generator(device="cuda").manual_seed(rank)
    width = HIDDEN // WORLD
    x = torch.randn(BATCH, width, device="cuda", generator=g)
    w = torch.randn(width, HIDDEN, device="cuda", generator=g) * width ** -0.5
    return x, w


def step(rank, s, x, w):
    """One step: partial, all-reduce through the peer's window, this rank's own GELU."""
    torch.mm(x, w, out=s["partial"])
    n = s["partial"].numel()
    peer = 1 - rank
    allreduce_two[(triton.cdiv(n, BLOCK),)](
        s["sum"], s["partial"], gt.peer_address(s["partial"], peer), s["flag"], gt.peer_address(s["flag"], peer),
        s["missing"], n, rank, TIMEOUT_NS, BLOCK=BLOCK)
    return torch.nn.functional.gelu(s["sum"])


def collective(fn):
    """Runs `fn` on every rank together, as the kit's launches do: flags down, all ranks
    here, run, all ranks done."""
    torch.cuda.synchronize()
    gt.sync_ranks()
    out = fn()
    torch.cuda.synchronize()
    gt.sync_ranks()
    return out


def rank_main(a):
    rank = a.rank
    device = rank if a.device_per_rank else 0
    gt.use_arena("1GiB", base=gt.DEFAULT_BASE + rank * gt.RANK_STRIDE, device=device, shareable=True)
    torch.cuda.set_device(device)
    # What peers read comes first, alike on every rank, so it lies at the same offsets.
    shared = {"partial": torch.zeros(BATCH, HIDDEN, device="cuda"), "flag": torch.zeros(1, dtype=torch.int32,
                                                                                          device="cuda")}
    s = dict(shared, sum=torch.zeros(BATCH, HIDDEN, device="cuda"),
             missing=torch.zeros(1, dtype=torch.int32, device="cuda"))
    x, w = slices(rank)
    gt.join_ranks(rank, WORLD, a.meet)
    y = collective(lambda: step(rank, s, x, w))
    reference = torch.nn.functional.gelu(sum(torch.mm(*slices(r)) for r in range(WORLD)))
    if s["missing"].item() or not torch.equal(y, reference):
        raise SystemExit(f"rank {rank}: the eager all-reduce gave other bits than the reference "
                         f"(missing peers {s['missing'].item():#x})")
    # A replay starts from this state: flags down and partials stale, so a rank that
    # reads its peer before the peer wrote reads zeros.
    collective(lambda: [t.zero_() for t in shared.values()])
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g, pool=gt.graph_pool()):
        out = step(rank, s, x, w)
    summary = gt.export({"step": g}, os.path.join(a.out, f"rank-{rank}"), weights={"w": w}, inputs={"x": x, **shared},
                        outputs={"y": out, "missing": s["missing"]})
    gt.report(summary, a.summary and f"{a.summary}.rank-{rank}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--summary")
    p.add_argument("--device-per-rank", action="store_true", help="rank R on GPU R instead of both on GPU 0")
    p.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--meet", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.meet is not None:
        return rank_main(a)
    with tempfile.TemporaryDirectory() as meet:
        peers = [subprocess.Popen([sys.executable, "-m", "gnomon.torch", *sys.argv, "--rank", str(r), "--meet", meet])
                 for r in range(1, WORLD)]
        a.meet = meet
        rank_main(a)
        failed = [r for r, peer in enumerate(peers, 1) if peer.wait() != 0]
    if failed:
        raise SystemExit(f"rank(s) {failed} failed")


if __name__ == "__main__":
    main()
