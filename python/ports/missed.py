"""A kernel whose image the recorder never saw: its module is loaded and run through the
driver before recording starts, then captured in a graph. Export must refuse the graph,
naming the node, the kernel and what is known of its library, rather than skip it.

    python python/ports/missed.py OUT      # exits 0 when export refused as it should
"""

import ctypes
import sys

import numpy as np
import torch
from cuda.bindings import driver as cu
from cuda.bindings import nvrtc

import gnomon.torch as gt

SOURCE = b'extern "C" __global__ void bump(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1.0f; }'


def checked(result):
    error, *values = result
    if int(error) != 0:
        raise RuntimeError(f"{error}")
    return values[0] if len(values) == 1 else values


def load_unseen():
    """Compiles `bump` and loads it through the driver before any recorder exists."""
    checked(cu.cuInit(0))
    ctx = checked(cu.cuDevicePrimaryCtxRetain(checked(cu.cuDeviceGet(0))))
    checked(cu.cuCtxSetCurrent(ctx))
    major, minor = (checked(cu.cuDeviceGetAttribute(a, 0)) for a in (
        cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
        cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))
    program = checked(nvrtc.nvrtcCreateProgram(SOURCE, b"bump.cu", 0, [], []))
    checked(nvrtc.nvrtcCompileProgram(program, 1, [f"--gpu-architecture=sm_{major}{minor}".encode()]))
    ptx = b" " * checked(nvrtc.nvrtcGetPTXSize(program))
    checked(nvrtc.nvrtcGetPTX(program, ptx))
    module = checked(cu.cuModuleLoadData(ptx))
    function = checked(cu.cuModuleGetFunction(module, b"bump"))
    # Run once, so the driver has loaded it whether or not module loading is lazy.
    scratch = checked(cu.cuMemAlloc(4096 * 4))
    launch(function, int(scratch), 4096, cu.CUstream(0))
    checked(cu.cuCtxSynchronize())
    return function


def launch(function, address, n, stream):
    values = (ctypes.c_void_p(address), ctypes.c_int(n))
    args = np.array([ctypes.addressof(v) for v in values], dtype=np.uint64)
    checked(cu.cuLaunchKernel(function, (n + 255) // 256, 1, 1, 256, 1, 1, 0, stream, args.ctypes.data, 0))


def main(out):
    bump = load_unseen()
    gt.record()
    gt.use_arena("1GiB")
    x = torch.zeros(4096, device="cuda")
    launch(bump, x.data_ptr(), x.numel(), cu.CUstream(torch.cuda.current_stream().cuda_stream))
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g, pool=gt.graph_pool()):
        launch(bump, x.data_ptr(), x.numel(), cu.CUstream(torch.cuda.current_stream().cuda_stream))
    try:
        gt.export({"bump": g}, out, outputs={"bump": {"x": x}})
    except RuntimeError as refused:
        print(f"refused: {refused}")
        return 0 if "has no recorded image" in str(refused) and "`bump`" in str(refused) else 1
    print("exported a graph whose kernel image was never recorded")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
