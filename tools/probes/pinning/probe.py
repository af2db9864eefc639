"""Issue 25, item 2: what page-locking a staging pool costs on this machine, and how fast
each kind of host memory copies to the device. Prints one JSON object per measurement:
  host-alloc      cuMemHostAlloc (what the restore's staging pool is today)
  register        anonymous memory, touched, then cuMemHostRegister (4 KiB pages)
  register-huge   the same with madvise(MADV_HUGEPAGE) on a 2 MiB-aligned range
  pageable        the touched anonymous memory, not page-locked (the driver stages it)
Usage: python3 probe.py [MiB ...]"""
import ctypes
import json
import mmap
import sys
import time

from cuda.bindings import driver as cu

HUGE = 2 << 20
REPEATS = 4


def ok(result):
    err, *rest = result
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(err)
    return rest[0] if len(rest) == 1 else None


def seconds(action):
    started = time.perf_counter()
    value = action()
    return time.perf_counter() - started, value


def h2d_gbps(device, address, n):
    ok(cu.cuCtxSynchronize())
    took, _ = seconds(lambda: [ok(cu.cuMemcpyHtoD(device, address, n)) for _ in range(REPEATS)])
    return n * REPEATS / took / 1e9


def anonymous(n, huge):
    """n bytes of anonymous memory at a 2 MiB boundary, touched; (keep-alive, address, touch-s)."""
    region = mmap.mmap(-1, n + HUGE)
    view = ctypes.c_char.from_buffer(region)
    address = (ctypes.addressof(view) + HUGE - 1) // HUGE * HUGE
    if huge:
        region.madvise(mmap.MADV_HUGEPAGE, address - ctypes.addressof(view), n)
    touch_s, _ = seconds(lambda: ctypes.memset(address, 0, n))
    return (region, view), address, touch_s


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [32, 64, 128, 256]
    ok(cu.cuInit(0))
    context = ok(cu.cuDevicePrimaryCtxRetain(ok(cu.cuDeviceGet(0))))
    ok(cu.cuCtxSetCurrent(context))
    device = ok(cu.cuMemAlloc(max(sizes) << 20))
    with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
        print(json.dumps({"transparent-hugepage": f.read().strip()}))
    for mib in sizes:
        n = mib << 20
        pin_s, host = seconds(lambda: ok(cu.cuMemHostAlloc(n, 0)))
        print(json.dumps({"kind": "host-alloc", "mib": mib, "pin-s": pin_s, "h2d-gbps": h2d_gbps(device, host, n)}))
        ok(cu.cuMemFreeHost(host))
        for kind, huge in (("register", False), ("register-huge", True)):
            keep, address, touch_s = anonymous(n, huge)
            pageable = h2d_gbps(device, address, n) if not huge else None
            pin_s, _ = seconds(lambda: ok(cu.cuMemHostRegister(address, n, 0)))
            print(json.dumps({"kind": kind, "mib": mib, "touch-s": touch_s, "pin-s": pin_s,
                              "h2d-gbps": h2d_gbps(device, address, n)}))
            ok(cu.cuMemHostUnregister(address))
            if pageable is not None:
                print(json.dumps({"kind": "pageable", "mib": mib, "h2d-gbps": pageable}))
            del keep


main()
