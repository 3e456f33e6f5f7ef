"""Building flash-attn 2 from source: what the build needs, how much memory a compile job takes, how long it
runs. What the doctor cannot read from the installed packages, each with the source it was read from.
"""

from __future__ import annotations

from dflash_doctor.knowledge import Fact

# The one sdist these were read from, under the label knowledge.flash_attn gives it.
from dflash_doctor.knowledge.flash_attn import _SDIST_283

__all__ = ["BUILD_MINUTES_64_CORES", "JOB_PEAK_RAM_GB", "NINJA_REQUIRED", "NVCC_MAJOR_MUST_MATCH",
           "NVCC_THREADS_DEFAULT", "TORCH_CUDA_HOME_SEARCH"]

_TORCH = "torch 2.13.0 (CPU wheel), torch/utils/cpp_extension.py"

JOB_PEAK_RAM_GB: Fact[int] = Fact(
    value=9,
    source="setup.py NinjaBuildExtension.__init__ (lines 509-521): `max_num_jobs_memory = int(free_memory_gb / 9)  "
    "# each JOB peak memory cost is ~8-9GB when threads = 4`; README: 'If your machine has less than 96GB of RAM "
    "and lots of CPU cores, ninja might run too many parallel compilation jobs that could exhaust the amount of "
    "RAM ... MAX_JOBS=4 pip install flash-attn --no-build-isolation'",
    read_from=_SDIST_283,
    note="flash-attention issues #389, #1038, #1581: builds killed for memory at the default MAX_JOBS. The doctor "
    "uses flash-attn's own formula, which setup.py applies only when MAX_JOBS is unset: "
    "MAX_JOBS = max(1, min(cores // 2, free_GB // 9)).",
)

NVCC_THREADS_DEFAULT: Fact[int] = Fact(
    value=4,
    source="setup.py:124 `nvcc_threads = os.getenv(\"NVCC_THREADS\") or \"4\"` (each ninja job runs nvcc --threads 4)",
    read_from=_SDIST_283,
)

BUILD_MINUTES_64_CORES: Fact[tuple[int, int]] = Fact(
    value=(3, 5),
    source="README.md lines 73-78: 'Without `ninja`, compiling can take a very long time (2h) since it does not "
    "use multiple CPU cores. With `ninja` compiling takes 3-5 minutes on a 64-core machine using CUDA toolkit.'",
    read_from=_SDIST_283,
    note="The doctor's estimate scales this linearly: 3-5 min x 64 cores = 192-320 core-minutes for the sdist's "
    "default arch list (80;90;100;120, FA2_CUDA_ARCHS_DEFAULT; an assumption: the README does not say which archs "
    "its figure built), times (archs built / 4), over the cores the build uses (min(cores, MAX_JOBS x "
    "NVCC_THREADS)). Users report hours where memory forces MAX_JOBS low (issues #945, #1038).",
)

NINJA_REQUIRED: Fact[str] = Fact(
    value="ninja (the `ninja` Python package) must be installed and `ninja --version` exit 0; without it the "
    "build runs one job at a time, about 2 hours",
    source="README.md lines 70-78 ('`ninja` Python package (`pip install ninja`)', 'Without `ninja`, compiling "
    "can take a very long time (2h)')",
    read_from=_SDIST_283,
)

NVCC_MAJOR_MUST_MATCH: Fact[str] = Fact(
    value="nvcc's CUDA major must equal torch.version.cuda's major (RuntimeError otherwise); a different minor "
    "only warns",
    source="_check_cuda_version(): `if cuda_ver.major != torch_cuda_version.major: raise "
    "RuntimeError(CUDA_MISMATCH_MESSAGE, ...)`, then `logger.warning(CUDA_MISMATCH_WARN, ...)` for a minor "
    "difference; it raises `nvcc not found at ...` when CUDA_HOME/bin/nvcc is missing",
    read_from=_TORCH,
)

TORCH_CUDA_HOME_SEARCH: Fact[tuple[str, ...]] = Fact(
    value=("CUDA_HOME", "CUDA_PATH", "dirname(dirname(which nvcc))", "/usr/local/cuda"),
    source="_find_cuda_home(): `os.environ.get('CUDA_HOME') or os.environ.get('CUDA_PATH')`, else the directory "
    "above the `nvcc` on PATH, else /usr/local/cuda when it exists; torch.version.cuda is `cuda` in "
    "torch/version.py (None in a CPU build)",
    read_from=_TORCH,
    note="flash-attn's setup.py builds CUDAExtension at import, so even preparing its metadata (pip's dry run) "
    "fails with 'OSError: CUDA_HOME environment variable is not set' when none is found (pip 23.2.1 on this "
    "project's CI machine, flash-attn 2.8.3).",
)
