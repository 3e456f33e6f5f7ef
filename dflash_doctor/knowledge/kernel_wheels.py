"""The kernel packages vLLM and flash-attn-4 load at run time (CuTe DSL, tvm-ffi, quack, FlashInfer, DeepGEMM), and
what is known to go wrong between them: the two halves of `nvidia-cutlass-dsl[cu13]` overwriting each other, and
the version pins that flash-attn-4 and vLLM disagree on.

Every version fact here was read from the packages' own metadata (the wheels' METADATA and RECORD, as pip's
`install --dry-run --report` and `download` gave them from PyPI on 2026-12-03) unless its source says otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping

from dflash_doctor.knowledge import Fact
from dflash_doctor.shape import frozen_dataclass

__all__ = ["CUTLASS_DSL_SPLIT", "KERNEL_DISTRIBUTIONS", "PIN_SKEWS", "CutlassDslSplit", "PinSkews"]


@frozen_dataclass(frozen=True)
class CutlassDslSplit:
    """Two distributions that install the same paths with different bytes, and which of them must win."""

    base: str
    """The half whose files must not win (nvidia-cutlass-dsl-libs-base)."""
    winner: str
    """The half whose files must be on disk (nvidia-cutlass-dsl-libs-cu13)."""
    measured: Mapping[str, str | int]
    """What was measured: the version, the paths both RECORDs list, how many of them differ."""
    fixed_in_cutlass_dsl: str
    fixed_in_vllm: str
    vllm_pins_colliding: str
    symptoms: tuple[str, ...]
    """How vLLM fails where the base's files won, each with its report."""


@frozen_dataclass(frozen=True)
class PinSkews:
    """The version pins that installed distributions disagree on, and how each skew fails at run time."""

    requirements: Mapping[str, Mapping[str, tuple[str, ...]]]
    """Requirer -> its releases -> the kernel packages' requirements they state."""
    symptoms: Mapping[str, str]
    """Kernel package -> how a version other than the pinned one fails."""


KERNEL_DISTRIBUTIONS: Fact[tuple[str, ...]] = Fact(
    value=(
        "nvidia-cutlass-dsl",
        "nvidia-cutlass-dsl-libs-base",
        "nvidia-cutlass-dsl-libs-cu12",
        "nvidia-cutlass-dsl-libs-cu13",
        "apache-tvm-ffi",
        "quack-kernels",
        "flashinfer-cubin",
        "flashinfer-jit-cache",
        "tilelang",
        "deep-gemm",
        "torch-c-dlpack-ext",
    ),
    source="Requires-Dist of the vllm wheels 0.20.0-0.27.1 (apache-tvm-ffi, nvidia-cutlass-dsl[cu13], quack-kernels, "
    "flashinfer-python, flashinfer-cubin, tilelang) and of flash-attn-4 4.0.0b36 (nvidia-cutlass-dsl>=4.6.2, "
    "apache-tvm-ffi<0.2,>=0.1.11, quack-kernels>=0.5.3, torch-c-dlpack-ext); nvidia-cutlass-dsl 4.5.2 requires "
    "nvidia-cutlass-dsl-libs-base==4.5.2 and, with [cu13], nvidia-cutlass-dsl-libs-cu13==4.5.2; 4.6.0 and 4.6.2 add "
    "nvidia-cutlass-dsl-libs-cu12. flashinfer-jit-cache is FlashInfer's prebuilt-kernel wheel (its own index); "
    "deep-gemm is DeepGEMM, which vLLM's tools/install_deepgemm.sh builds from source (its distribution name not "
    "verified here: a DeepGEMM installed under another name is simply not verified)",
    read_from="PyPI metadata of vllm 0.20.0, 0.20.1, 0.21.0, 0.22.0, 0.22.1, 0.23.0, 0.24.0, 0.25.0, 0.25.1, 0.26.0, "
    "0.27.0, 0.27.1; flash-attn-4 4.0.0b36; nvidia-cutlass-dsl 4.5.2, 4.6.0, 4.6.2 (2026-12-03)",
    note="Besides the serving stack (knowledge.stack), these distributions' RECORDs are verified, and the paths two "
    "verified distributions both list are compared byte for byte (hashing only those whose RECORD hashes differ).",
)


CUTLASS_DSL_SPLIT: Fact[CutlassDslSplit] = Fact(
    value=CutlassDslSplit(
        base="nvidia-cutlass-dsl-libs-base",
        winner="nvidia-cutlass-dsl-libs-cu13",
        measured={"version": "4.5.2", "shared": 180, "differing": 99},
        fixed_in_cutlass_dsl="4.6.0",
        fixed_in_vllm="0.26.0",
        vllm_pins_colliding="0.22.0-0.25.1 (nvidia-cutlass-dsl[cu13]==4.5.2)",
        symptoms=(
            ("`mlir_global_dtors() missing 1 required positional argument: 'data'` (vllm-project/vllm #44949, "
             "vLLM 0.22.1)"),
            "`import cutlass` / `from cutlass.cute.core import increment_coord` fails (ai-dynamo/dynamo #11775)",
            "malformed `_mma` PTX that ptxas rejects (NVIDIA/cutlass #3170, #3259)",
        ),
    ),
    source="The wheels nvidia_cutlass_dsl_libs_base-4.5.2 and nvidia_cutlass_dsl_libs_cu13-4.5.2 (cp311, "
    "manylinux_2_28_x86_64): both install nvidia_cutlass_dsl/ and nvidia_cutlass_dsl.pth; their RECORDs share 180 "
    "paths, 99 of them with different sha256 (_cutlass_ir.cpython-311-x86_64-linux-gnu.so, libcute_dsl_runtime.so, "
    "the generated _*_ops_gen.py ...), every one of different size too. nvidia-cutlass-dsl[cu13] installs both; "
    "the one installed last holds the shared paths. NVIDIA/cutlass #3170 (4.4.x: 'both unpack into the same path "
    "but with divergent contents ... When libs-base's files win' the PTX is malformed; maintainer: 'fixed in 4.6 "
    "release'); ai-dynamo/dynamo #11775 ('fixed upstream in vLLM v0.26.0 via the nvidia-cutlass-dsl 4.6.0 bump, "
    "which moves the CuTe Python sources into a single wheel and removes the file collision'); vllm-project/vllm PR "
    "#47442 ('Bump nvidia-cutlass-dsl to 4.6.0 and drop packaging workarounds'); sgl-project/sglang PR #25938 (the "
    "same collision in 4.5.0 and 4.5.1). vLLM 0.22.0-0.25.1 require nvidia-cutlass-dsl[cu13]==4.5.2, 0.26.0 and "
    "0.27.x nvidia-cutlass-dsl[cu13]==4.6.0 (their METADATA). vLLM 0.24.0 and 0.25.1 check it themselves: "
    "vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py _is_libs_cu13_install_intact() re-hashes every "
    "file of -libs-cu13 against its RECORD ('both ship into the shared nvidia_cutlass_dsl/ namespace and write many "
    "of the same on-disk paths ... with different' contents; NVIDIA/cutlass #3170, #3259) and, when one differs, "
    "falls back from FlashInfer's Blackwell GDN kernel with 'Repair with: pip install --force-reinstall --no-deps "
    "nvidia-cutlass-dsl-libs-cu13'; 0.26.0 no longer has it. vllm #44949 was read in its title and environment "
    "only (vLLM v0.22.1, CUDA 13.0.2); the --force-reinstall step in vLLM 0.25.1's Dockerfile was not verified "
    "here (the sdists hold no docker/; taken from the report that filed this class)",
    read_from="nvidia-cutlass-dsl-libs-base/-cu13 4.5.2 wheels (sha256 9117900c..., df61430d...); vllm 0.22.0-0.27.1 "
    "METADATA; vllm 0.24.0, 0.25.1 and 0.26.0 sdists; the issues as of 2026-12",
    note="sgl-project/sglang PR #25938 reports the opposite preference on non-Blackwell CUDA 13 GPUs for a LoRA "
    "CUDA-graph crash (sglang #25743); for vLLM the cu13 half is the one its [cu13] pin asks for.",
)


PIN_SKEWS: Fact[PinSkews] = Fact(
    value=PinSkews(
        requirements={
            "flash-attn-4": {"4.0.0b36": ("nvidia-cutlass-dsl>=4.6.2", "apache-tvm-ffi<0.2,>=0.1.11",
                                          "quack-kernels>=0.5.3")},
            "vllm": {"0.20.0-0.25.1": ("apache-tvm-ffi==0.1.9",), "0.26.0": ("apache-tvm-ffi==0.1.10",),
                     "0.27.0-0.27.1": ("apache-tvm-ffi==0.1.11",)},
        },
        symptoms={
            "apache-tvm-ffi": "`make_kwargs_wrapper() got an unexpected keyword argument 'map_dataclass_to_tuple'` "
            "(nvidia-cutlass-dsl 4.6 calls it; apache/tvm-ffi PR #515 added the parameter, after 0.1.9)",
            "nvidia-cutlass-dsl": "`module 'cutlass.cute.core' has no attribute 'ThrMma'` (nvidia-cutlass-dsl 4.6.0 "
            "removed cute.core.ThrMma, which older quack-kernels use: meta-pytorch/tritonbench PR #1169, "
            "vllm-project/vllm #49005)",
        },
    ),
    source="Requires-Dist of flash-attn-4 4.0.0b36 and of the vllm releases named (their METADATA from PyPI); "
    "apache/tvm-ffi PR #515 '[FEAT] Add map_dataclass_to_tuple to make_kwargs_wrapper' (merged 2026-03-26); the "
    "wheels: apache-tvm-ffi 0.1.9's tvm_ffi/utils/kwargs_wrapper.py make_kwargs_wrapper (line 129) has no "
    "map_dataclass_to_tuple, 0.1.11's has it (line 221); CuTe DSL 4.6's tvm-ffi provider passes "
    "map_dataclass_to_tuple= and asks for 'apache-tvm-ffi>=0.1.11' (read in its public source, the 4.6 wheel not "
    "opened here); "
    "meta-pytorch/tritonbench PR #1169 ('nvidia-cutlass-dsl 4.6.0 ... removed cute.core.ThrMma'). "
    "NVIDIA/cosmos-framework #221 (the ThrMma report cited by the issue that filed this class) was not found here",
    read_from="flash-attn-4 4.0.0b36; vllm 0.20.0-0.27.1; apache-tvm-ffi 0.1.9 and 0.1.11 wheels (2026-12-03)",
    note="Installing flash-attn-4 with its dependencies next to vLLM 0.20-0.25 upgrades apache-tvm-ffi past vLLM's "
    "==0.1.9 pin (and nvidia-cutlass-dsl past its ==4.5.2): the doctor names the installed distribution whose "
    "requirement was met last, from the RECORD times.",
)
