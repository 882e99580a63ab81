"""The tools bench/run measures and how each runs: sotto in its precisions,
whisper.cpp in its two attention modes, faster-whisper in int8 and fp32,
and the pair held to AVX2 that stands in for an AVX2-only CPU."""

from __future__ import annotations

import cpu

MICRO_TOOLS = ["sotto-fp32", "sotto-bf16", "sotto-int8", "sotto-avx2", "whispercpp", "whispercpp-nofa", "fw-int8",
               "fw-fp32", "fw-int8-avx2"]
FILE_TOOLS = ["sotto-fp32", "sotto-bf16", "sotto-int8", "sotto-avx2", "whispercpp", "fw-int8", "fw-fp32",
              "fw-int8-avx2"]
# --random: the tools of the big releases' figures (fp32 and AVX2 on demand)
RANDOM_TOOLS = ["sotto-bf16", "sotto-int8", "whispercpp", "whispercpp-nofa", "fw-int8"]
SOTTO_TOOLS = ("sotto-bf16", "sotto-int8", "sotto-fp32", "sotto-avx2")
PEERS = ("whispercpp", "whispercpp-nofa", "fw-int8", "fw-fp32", "fw-int8-avx2")
# sotto-avx2: precision auto from a build without AVX-512 (meson
# -Dmax_isa=avx2, bench.py builds it beside --build-dir), with oneDNN held
# to AVX2 (ONEDNN_MAX_CPU_ISA; such a build holds it so by itself): the
# path of a CPU without AMX or AVX-512 (int8 on AVX2), sotto's hand
# kernels and element-wise loops in their AVX2 forms. fw-int8-avx2:
# faster-whisper int8 held to AVX2 the same way, CTranslate2's own kernels
# (CT2_FORCE_CPU_ISA) and the GEMM libraries it may call (MKL, oneDNN).
# Figures made so on an AVX-512 machine stand in for an AVX2-only CPU of
# the same cores; the reports name the variables.
AVX2_ONEDNN = {"ONEDNN_MAX_CPU_ISA": "AVX2"}
AVX2_CT2 = {"CT2_FORCE_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", **AVX2_ONEDNN}
SOTTO_RUN = {"sotto-fp32": ("fp32", {}), "sotto-bf16": ("bf16", {}), "sotto-int8": ("int8", {}),
             "sotto-avx2": ("auto", AVX2_ONEDNN)}
FW_RUN = {"fw-int8": ("int8", {}), "fw-fp32": ("float32", {}), "fw-int8-avx2": ("int8", AVX2_CT2)}
LABEL = {"sotto-fp32": "sotto fp32", "sotto-bf16": "sotto bf16", "sotto-int8": "sotto int8",
         "sotto-avx2": "sotto auto, AVX2 forced",
         "whispercpp": "whisper.cpp (flash attn)", "whispercpp-nofa": "whisper.cpp (no flash attn)",
         "fw-int8": "faster-whisper int8", "fw-fp32": "faster-whisper float32",
         "fw-int8-avx2": "faster-whisper int8, AVX2 forced"}


def tool_env(tool: str) -> dict:
    """The environment a tool runs with beyond this process's own."""
    return (SOTTO_RUN.get(tool) or FW_RUN.get(tool) or ("", {}))[1]


def runs_here(tool: str) -> bool:
    """sotto's bf16 and int8 need what the CPU (under ONEDNN_MAX_CPU_ISA)
    may not have (tests/cpu.py); every other tool runs anywhere."""
    return {"sotto-bf16": cpu.bf16, "sotto-int8": cpu.int8}.get(tool, lambda: True)()
