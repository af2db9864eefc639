#!/usr/bin/env python3
"""Issue 25: cores replayed warm (`gnomon replay`) by allocator arms taking turns, each
replay with its own page faults, CPU time and /proc/vmstat deltas (huge pages, compaction,
reclaim). Arms (ARMS, all when unset): `glibc` (main's binary, ac89e3d), `jemalloc`
(baselines/h200-sm90-580.159.04-models/prelude/jemalloc/jemalloc.patch: jemalloc with
thp:always for the whole process), `tunables` (main's binary with glibc's main arena for
every thread, on huge pages), `arena` (target/carry/gnomon: jemalloc, huge pages for the
instantiating threads' arena alone).
Rounds until DEADLINE seconds since the epoch; each round starts with a different arm.
Usage: ab.py OUT CORE...
"""
import json, os, resource, subprocess, sys, time

ARMS = {
    "glibc": ("target/carry/gnomon-glibc", {}),
    "jemalloc": ("target/carry/gnomon-jemalloc", {}),
    "tunables": ("target/carry/gnomon-glibc",
                 {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1:glibc.malloc.arena_max=1"}),
    "arena": ("target/carry/gnomon", {}),
}
VMSTAT = ("thp_fault_alloc", "thp_fault_fallback", "compact_stall", "compact_fail",
          "compact_success", "pgscan_direct", "pgsteal_direct", "pgfault", "pgmajfault",
          "thp_collapse_alloc", "thp_split_page")


def vmstat():
    with open("/proc/vmstat") as f:
        pairs = (line.split() for line in f)
        return {k: int(v) for k, v in pairs if k in VMSTAT}


def replay(out, name, core, arm, rnd):
    binary, extra = ARMS[arm]
    result = f"{out}/{name}-{arm}-{rnd}.json"
    before, usage = vmstat(), resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run([binary, "replay", core, "--result", result],
                          env={**os.environ, **extra}, capture_output=True, text=True, timeout=120)
    wall = time.monotonic() - started
    after, used = vmstat(), resource.getrusage(resource.RUSAGE_CHILDREN)
    metrics = {}
    if os.path.exists(result):
        metrics = {k: v["value"] for k, v in json.load(open(result))["metrics"].items()}
    return {"core": name, "arm": arm, "round": rnd, "rc": done.returncode, "wall-s": wall,
            "minflt": used.ru_minflt - usage.ru_minflt,
            "utime": used.ru_utime - usage.ru_utime, "stime": used.ru_stime - usage.ru_stime,
            "vmstat": {k: after[k] - before[k] for k in after},
            "stderr-tail": done.stderr[-300:], "metrics": metrics}


def main():
    out, cores = sys.argv[1], sys.argv[2:]
    deadline = float(os.environ.get("DEADLINE", time.time() + 300))
    arms = os.environ.get("ARMS", " ".join(ARMS)).split()
    with open(f"{out}/ab.jsonl", "a") as log:
        for rnd in range(1, int(os.environ.get("ROUNDS", 3)) + 1):
            order = arms[rnd % len(arms):] + arms[:rnd % len(arms)]
            for core in cores:
                if time.time() > deadline:
                    return
                for arm in order:
                    row = replay(out, os.path.basename(core.rstrip("/")), core, arm, rnd)
                    log.write(json.dumps(row) + "\n")
                    log.flush()


main()
