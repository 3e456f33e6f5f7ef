"""GPU architecture names and the rules for which compiled code runs on which compute capability.

Pure functions over strings: `sm_86` (SASS, a real architecture), `sm_90a` (architecture-specific),
`sm_100f` (family-specific, CUDA 12.9+), `compute_90` (PTX, a virtual architecture). Each rule is a
`Fact` in `dflash_doctor.knowledge.cuda` with the NVIDIA document it comes from.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final, Literal, TypeAlias, TypedDict

from dflash_doctor.knowledge.cuda import TEGRA_COMPUTE_CAPABILITIES
from dflash_doctor.shape import frozen_dataclass

__all__ = [
    "CC",
    "MAX_TARGET_ARCHS",
    "Arch",
    "Coverage",
    "arch_sort_key",
    "compute_capability",
    "coverage",
    "parse_arch",
    "parse_target_archs",
    "ptx_jit_possible",
    "sass_runs_on",
]

CC: TypeAlias = tuple[int, int]
CCLike: TypeAlias = CC | str

MAX_TARGET_ARCHS: Final = 32
"""--target-arch names at most this many GPU architectures (every one from sm_50 to sm_121 is fewer)."""

_ARCH_RE: Final = re.compile(r"^(sm|compute|lto)_(\d{2,3})([af]?)$")
_CC_RE: Final = re.compile(r"^(\d{1,2})\.(\d)([af]?)$")
# At one minor, prefer the most specific build: what its author tuned for this exact GPU.
_SUFFIX_RANK: Final[dict[str, int]] = {"": 0, "f": 1, "a": 2}


@frozen_dataclass(frozen=True)
class Arch:
    kind: Literal["sm", "compute", "lto"]
    major: int
    minor: int
    suffix: Literal["", "a", "f"]

    @property
    def cc(self) -> CC:
        return (self.major, self.minor)

    def __str__(self) -> str:
        return f"{self.kind}_{self.major}{self.minor}{self.suffix}"


def parse_arch(name: str) -> Arch:
    """`sm_86`, `sm_90a`, `sm_100f`, `compute_90`, `lto_90` -> Arch; ValueError otherwise.

    The last digit is the minor version: sm_100 is 10.0, sm_75 is 7.5.
    """
    match = _ARCH_RE.match(name.strip().lower())
    if match is None:
        raise ValueError(f"not a GPU architecture name: {name!r} (expected e.g. sm_86, sm_90a, compute_90)")
    kind, digits, suffix = match.groups()
    return Arch(kind, int(digits[:-1]), int(digits[-1]), suffix)  # type: ignore[arg-type]


def compute_capability(value: CCLike) -> CC:
    """The compute capability an arch name or a CC spelling denotes: `sm_90a`, `compute_90`, `9.0`, `90`,
    `(9, 0)` -> (9, 0)."""
    if isinstance(value, tuple):
        major, minor = value
        if major < 1 or not 0 <= minor <= 9:
            raise ValueError(f"not a compute capability: {value!r}")
        return (int(major), int(minor))
    text = value.strip().lower()
    dotted = _CC_RE.match(text)
    if dotted is not None:
        return (int(dotted.group(1)), int(dotted.group(2)))
    if text.isdigit() and len(text) in (2, 3):
        return (int(text[:-1]), int(text[-1]))
    return parse_arch(text).cc


def parse_target_archs(spec: str) -> list[CC]:
    """`--target-arch sm_86,sm_90` (commas or spaces; also `8.6`, `9.0a`) -> [(8, 6), (9, 0)], in order,
    without repeats; ValueError past MAX_TARGET_ARCHS names."""
    out: list[CC] = []
    tokens = re.split(r"[,\s;]+", spec.strip(), maxsplit=MAX_TARGET_ARCHS)
    if len(tokens) > MAX_TARGET_ARCHS and tokens[-1]:
        raise ValueError(f"more than {MAX_TARGET_ARCHS} architectures")
    for token in tokens:
        if token:
            cc = compute_capability(token)
            if cc not in out:
                out.append(cc)
    if not out:
        raise ValueError(f"no architectures in {spec!r}")
    return out


def arch_sort_key(name: str) -> tuple[int, int, int, str]:
    """Order arch names numerically (sm_90 < sm_90a < sm_100); unparsable names sort last."""
    try:
        arch = parse_arch(name)
    except ValueError:
        return (1_000, 0, 0, name)
    return (arch.major, arch.minor, _SUFFIX_RANK[arch.suffix], name)


def _expect(name: str, kind: str) -> Arch:
    arch = parse_arch(name)
    if arch.kind != kind:
        raise ValueError(f"{name!r} is not a {'SASS (sm_XY)' if kind == 'sm' else 'PTX (compute_XY)'} arch")
    return arch


def sass_runs_on(sass: str, cc: CCLike) -> bool:
    """Whether a cubin built for `sass` (sm_XY[a|f]) executes on a GPU of compute capability `cc`.

    knowledge.cuda SASS_WITHIN_MAJOR: sm_XY on X.Z for Z >= Y, never across majors (and on Tegra only the
    exact CC, TEGRA_COMPUTE_CAPABILITIES). SASS_ARCH_SPECIFIC: sm_XYa on exactly X.Y.
    SASS_FAMILY_SPECIFIC: sm_XYf on the family, X.Z for Z >= Y.
    """
    arch = _expect(sass, "sm")
    device = compute_capability(cc)
    if arch.suffix == "a":
        return device == arch.cc
    tegra = TEGRA_COMPUTE_CAPABILITIES.value
    if arch.cc in tegra or device in tegra:
        return device == arch.cc
    return device[0] == arch.major and device[1] >= arch.minor


def ptx_jit_possible(ptx: str, cc: CCLike) -> bool:
    """Whether the driver can JIT-compile PTX for `ptx` (compute_XY[a|f]) for compute capability `cc`.

    knowledge.cuda PTX_FORWARD_COMPATIBLE: compute_XY for any CC >= X.Y. PTX_ARCH_SPECIFIC: compute_XYa
    for exactly X.Y. PTX_FAMILY_SPECIFIC: compute_XYf for X.Z with Z >= Y. Whether the driver knows the
    PTX ISA version is a separate question (the driver's age, not the GPU's).
    """
    arch = _expect(ptx, "compute")
    device = compute_capability(cc)
    if arch.suffix == "a":
        return device == arch.cc
    if arch.suffix == "f":
        return device[0] == arch.major and device[1] >= arch.minor
    return device >= arch.cc


class Coverage(TypedDict):
    status: Literal["sass", "ptx-jit", "none"]
    by: str | None


def coverage(sass: Iterable[str], ptx: Iterable[str], cc: CCLike) -> Coverage:
    """How a binary carrying `sass` cubins and `ptx` modules gets code for compute capability `cc`.

    "sass" when a cubin runs as is, "ptx-jit" when only PTX can be JIT-compiled for it (slow first launch,
    needs a driver that knows the PTX version), "none" when the GPU has no kernel image ("no kernel image
    is available for execution on the device"). `by` names the code that would serve: the best matching
    cubin (highest minor; at one minor a > f > plain), else the newest usable PTX.
    """
    device = compute_capability(cc)
    runnable = [name for name in sass if sass_runs_on(name, device)]
    if runnable:
        best = max(runnable, key=lambda n: (parse_arch(n).minor, _SUFFIX_RANK[parse_arch(n).suffix]))
        return {"status": "sass", "by": best}
    jittable = [name for name in ptx if ptx_jit_possible(name, device)]
    if jittable:
        return {"status": "ptx-jit", "by": max(jittable, key=arch_sort_key)}
    return {"status": "none", "by": None}
