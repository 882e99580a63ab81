"""What sotto can run on this CPU, decided as sotto decides it.

One place for every test (and bench/bench.py) that depends on the CPU;
`import cpu` works from every test folder (pytest.ini: pythonpath = tests).

sotto picks its paths from oneDNN's effective ISA
(dnnl_get_effective_cpu_isa(): the CPU's, capped by ONEDNN_MAX_CPU_ISA or
DNNL_MAX_CPU_ISA), so this module asks the same libdnnl the same question
instead of reading /proc/cpuinfo (in a process of its own): with ONEDNN_MAX_CPU_ISA=AVX2 exported on
an AVX-512 machine the suite takes the paths of an AVX2-only machine.

- bf16(): precision bf16 runs, and auto means bf16 (lib/gemm.c
  cpu_has_bf16: the effective ISA has AVX512_CORE_BF16); else bf16 is
  refused and auto means fp32.
- amx(): the effective ISA has AVX512_CORE_AMX (lib/gemm.c cpu_has_amx).
- int8(): precision int8 runs, on either path:
  int8_vnni() (lib/model.c: gemv_i8_supported(), which reads CPUID for
  AVX512-VNNI/BW/VL/BF16 whatever the cap, and then the bf16 products,
  which follow the cap), else int8_avx2() (gemv_i8_avx2_supported(): the
  effective ISA has AVX2 and CPUID FMA and F16C; the decoder in int8, the
  rest fp32).
- cap_env(isa): the environment that forces a narrower ISA on sotto, or
  None where the effective ISA is already narrower (forcing it would raise
  an outer ONEDNN_MAX_CPU_ISA instead of lowering it).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

# oneDNN's dnnl_cpu_isa_t (oneapi/dnnl/dnnl_types.h, 2.x): each ISA's bits
# include those of the ISAs it extends, so "has X" is (isa & X) == X, as
# lib/gemm.c tests it.
ISA_BITS = {
    "SSE41": 0x1,
    "AVX": 0x3,
    "AVX2": 0x7,
    "AVX512_CORE": 0x27,
    "AVX512_CORE_VNNI": 0x67,
    "AVX512_CORE_BF16": 0xe7,
    "AVX512_CORE_AMX": 0x3e7,
}
# the CPUID flags of lib/gemv-i8.c gemv_i8_supported(), as /proc/cpuinfo names them
INT8_FLAGS = ("avx512_vnni", "avx512bw", "avx512vl", "avx512_bf16")
# and of lib/gemv-i8-avx2.c gemv_i8_avx2_supported()
INT8_AVX2_FLAGS = ("avx2", "fma", "f16c")


_QUERY = """
import ctypes, ctypes.util, sys
errors = []
for name in filter(None, [ctypes.util.find_library("dnnl"), "libdnnl.so.3", "libdnnl.so.2"]):
    try:
        lib = ctypes.CDLL(name)
    except OSError as e:
        errors.append(str(e))
        continue
    print(lib.dnnl_get_effective_cpu_isa())
    sys.exit(0)
sys.exit("cannot load oneDNN: " + "; ".join(errors))
"""


@functools.lru_cache(maxsize=None)
def effective_isa() -> int:
    """dnnl_get_effective_cpu_isa() in this environment. Asked in a process
    of its own: libdnnl brings libgomp, which reads OMP_* once when it is
    loaded, before tests/parity/conftest.py has set OMP_WAIT_POLICY."""
    cp = subprocess.run([sys.executable, "-c", _QUERY], capture_output=True, text=True,
                        stdin=subprocess.DEVNULL, timeout=60)
    if cp.returncode != 0:
        raise RuntimeError(f"tests/cpu.py: oneDNN's effective ISA: {cp.stderr.strip()} "
                           "(libdnnl-dev: scripts/setup)")
    return int(cp.stdout)


def has(isa: str) -> bool:
    """The effective ISA includes `isa` (a key of ISA_BITS)."""
    bits = ISA_BITS[isa]
    return effective_isa() & bits == bits


def isa_name() -> str:
    """The widest ISA_BITS name the effective ISA includes, e.g. 'AVX2'."""
    best = max(((b, n) for n, b in ISA_BITS.items() if has(n)), default=None)
    return best[1] if best else "no SSE4.1"


@functools.lru_cache(maxsize=None)
def flags() -> frozenset[str]:
    """The CPU's own flags (/proc/cpuinfo), whatever the cap."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    return frozenset(line.partition(":")[2].split())


def cap() -> str | None:
    """The ISA cap this process (and every sotto it starts) runs under."""
    return os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA")


def bf16() -> bool:
    """sotto runs precision bf16 here (and auto is bf16)."""
    return has("AVX512_CORE_BF16")


def amx() -> bool:
    """oneDNN's effective ISA has AMX (sotto also needs the kernel's permission)."""
    return has("AVX512_CORE_AMX")


def int8_vnni() -> bool:
    """sotto runs precision int8 on AVX512-VNNI here (encoder and decoder)."""
    return all(f in flags() for f in INT8_FLAGS) and bf16()


def int8_avx2() -> bool:
    """sotto runs precision int8 on AVX2 here: no int8_vnni(), the
    effective ISA has AVX2 and the CPU FMA and F16C."""
    return not int8_vnni() and has("AVX2") and \
        all(f in flags() for f in INT8_AVX2_FLAGS)


def int8() -> bool:
    """sotto runs precision int8 here (either path)."""
    return int8_vnni() or int8_avx2()


def default_precision() -> str:
    """What precision auto means here (lib/model/model.c auto_int8_avx2:
    int8's AVX2 path where there is no bf16)."""
    return "bf16" if bf16() else "int8" if int8_avx2() else "fp32"


def describe() -> str:
    """For skip reasons and reports: 'AVX2' or 'AVX2 (ONEDNN_MAX_CPU_ISA=AVX2)'."""
    c = cap()
    return f"{isa_name()} (ONEDNN_MAX_CPU_ISA={c})" if c else isa_name()


def cap_env(isa: str) -> dict[str, str] | None:
    """Environment that makes sotto run `isa`'s paths, or None where this
    CPU (under its cap) does not have `isa`."""
    return {"ONEDNN_MAX_CPU_ISA": isa} if has(isa) else None


def no(what: str, covered_by: str) -> str:
    """A skip reason: this CPU lacks `what`; `covered_by` tests the same
    behaviour on the path this CPU has."""
    return f"this CPU runs {describe()}, without {what}; {covered_by}"
