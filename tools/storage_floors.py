"""The floors an export's snapshot is held to, measured on the machine it runs on:
device-to-host bandwidth (into page-locked memory, as the exporter copies, and into
pageable memory) and the write bandwidth of the folder a core goes to (into the page cache,
as the exporter writes, and to the disk with fdatasync). Prints one JSON object, with the
kernel's dirty-page limits: a write larger than they allow into the page cache is held to
the disk's pace, so measure with as many GiB as the snapshot writes.

    python3 tools/storage_floors.py DIR [GiB]
"""

import json
import os
import sys
import time

import torch

SLOT = 64 << 20


def device_to_host(n):
    src = torch.empty(n, dtype=torch.uint8, device="cuda").fill_(1)
    found = {}
    for name, pinned in (("d2h-pinned-gbps", True), ("d2h-pageable-gbps", False)):
        dst = torch.empty(n, dtype=torch.uint8, pin_memory=pinned)
        dst.copy_(src)  # faults the pages in
        torch.cuda.synchronize()
        started = time.perf_counter()
        for at in range(0, n, SLOT):
            dst[at:at + SLOT].copy_(src[at:at + SLOT])
        torch.cuda.synchronize()
        found[name] = n / (time.perf_counter() - started) / 1e9
    return found


def disk_write(folder, n):
    path = os.path.join(folder, "floor.bin")
    block = os.urandom(SLOT)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        started = time.perf_counter()
        for at in range(0, n, SLOT):
            os.pwrite(fd, block, at)
        written = time.perf_counter() - started
        os.fdatasync(fd)
        synced = time.perf_counter() - started
    finally:
        os.close(fd)
        os.unlink(path)
    return {"write-page-cache-gbps": n / written / 1e9, "write-fdatasync-gbps": n / synced / 1e9}


def dirty_limits():
    def read(path):
        with open(path) as f:
            return f.read()
    mem_kib = next(int(l.split()[1]) for l in read("/proc/meminfo").splitlines() if l.startswith("MemTotal:"))
    vm = {name: int(read(f"/proc/sys/vm/{name}")) for name in ("dirty_ratio", "dirty_background_ratio", "dirty_bytes")}
    return {"mem-total-bytes": mem_kib << 10, **{f"vm-{k.replace('_', '-')}": v for k, v in vm.items()}}


def main():
    folder, gib = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 8
    n = gib << 30
    copied = min(n, 8 << 30)  # device-to-host is at its pace long before that
    found = {"write-bytes": n, "d2h-bytes": copied, **device_to_host(copied), **disk_write(folder, n)}
    found.update(dirty_limits())
    print(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
