"""Writes core/src/replay/checksum.ptx: NVRTC's PTX of checksum.cu for the oldest arch
NVRTC 13 targets, so a restore loads its check kernels without compiling them.

Run where NVRTC is installed (cuda-bindings): python3 tools/checksum_ptx.py [OUT]
The first line names the source's SHA-256, which a CPU test holds against checksum.cu.
"""

import hashlib
import pathlib
import sys

from cuda.bindings import nvrtc

ARCH = b"--gpu-architecture=compute_75"
HERE = pathlib.Path(__file__).resolve().parent.parent / "core" / "src" / "replay"


def check(result):
    err, *values = result
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise SystemExit(f"NVRTC: {err}")
    return values[0] if len(values) == 1 else values


def main():
    source = (HERE / "checksum.cu").read_bytes()
    program = check(nvrtc.nvrtcCreateProgram(source, b"checksum.cu", 0, [], []))
    if nvrtc.nvrtcCompileProgram(program, 1, [ARCH])[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        log = b" " * check(nvrtc.nvrtcGetProgramLogSize(program))
        nvrtc.nvrtcGetProgramLog(program, log)
        raise SystemExit(log.decode())
    ptx = b" " * check(nvrtc.nvrtcGetPTXSize(program))
    check(nvrtc.nvrtcGetPTX(program, ptx))
    major, minor = check(nvrtc.nvrtcVersion())
    header = (
        f"// gnomon: checksum.cu sha256 {hashlib.sha256(source).hexdigest()}, "
        f"NVRTC {major}.{minor} {ARCH.decode()} (tools/checksum_ptx.py)\n"
    )
    out = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "checksum.ptx"
    out.write_text(header + ptx.rstrip(b"\0").decode())


if __name__ == "__main__":
    main()
