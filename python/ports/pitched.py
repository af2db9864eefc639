"""Graphs whose memset or copy nodes are not one contiguous run, which the export must
refuse by name rather than write a core whose rebuilt node writes other bytes: a pitched
2-D memset (rows of 1 KiB, 2 KiB apart) and a 2-D copy from an offset with a pitch, each
put into a capture through the driver API (cuda-bindings), beside a flat memset and a
flat copy that export.

    python -m gnomon.torch python/ports/pitched.py OUT_DIR

Prints one line per graph, and exits 0 when the two flat graphs exported and the two
pitched ones were refused naming their node.
"""

import os
import sys

import torch
from cuda.bindings import driver as cu

import gnomon.torch as gt

ROW, ROWS, PITCH = 1024, 8, 2048


def ok(result):
    err = result[0] if isinstance(result, tuple) else result
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"driver: {err}")


def memset_2d(dst, pitch, stream):
    ok(cu.cuMemsetD2D32Async(cu.CUdeviceptr(dst), pitch, 0x3F800000, ROW // 4, ROWS, cu.CUstream(stream)))


def copy_2d(src, src_x, src_pitch, dst, dst_pitch, stream):
    p = cu.CUDA_MEMCPY2D()
    p.srcMemoryType = p.dstMemoryType = cu.CUmemorytype.CU_MEMORYTYPE_DEVICE
    p.srcDevice, p.srcXInBytes, p.srcPitch = cu.CUdeviceptr(src), src_x, src_pitch
    p.dstDevice, p.dstPitch = cu.CUdeviceptr(dst), dst_pitch
    p.WidthInBytes, p.Height = ROW, ROWS
    ok(cu.cuMemcpy2DAsync(p, cu.CUstream(stream)))


def captured(fill):
    """A graph of `fill(stream)` then a doubling kernel, and its output."""
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g, pool=gt.graph_pool()):
        out = fill(torch.cuda.current_stream().cuda_stream)
    return g, out


def main(out):
    gt.use_arena("1GiB")
    a = torch.arange(ROWS * PITCH // 4, device="cuda", dtype=torch.float32)
    b = torch.zeros_like(a)
    torch.cuda.synchronize()

    def flat_memset(s):
        memset_2d(b.data_ptr(), ROW, s)
        return b[: ROWS * ROW // 4] * 2

    def pitched_memset(s):
        memset_2d(b.data_ptr(), PITCH, s)
        return b * 2

    def flat_copy(s):
        copy_2d(a.data_ptr(), 0, ROW, b.data_ptr(), ROW, s)
        return b * 2

    def offset_copy(s):
        copy_2d(a.data_ptr(), 64, PITCH, b.data_ptr(), ROW, s)
        return b * 2

    cases = {"flat-memset": (flat_memset, True), "pitched-memset": (pitched_memset, False),
             "flat-copy": (flat_copy, True), "offset-copy": (offset_copy, False)}
    right = 0
    for name, (fill, flat) in cases.items():
        g, y = captured(fill)
        try:
            gt.export({name: g}, os.path.join(out, name), inputs={"a": a}, outputs={"y": y}, progress=False)
            said, exported = "exported", True
        except Exception as e:  # the kit's refusal, in its words
            said, exported = f"refused: {e}", False
        right += exported == flat and (flat or "cannot" in said or "contiguous run" in said)
        print(f"{name}: {said}", flush=True)
    print(f"{right} of {len(cases)} as expected")
    return 0 if right == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
