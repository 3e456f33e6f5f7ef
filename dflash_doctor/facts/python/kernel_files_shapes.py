"""The shape of the `kernel_files` section (`facts.python.kernel_files`): FlashInfer's JIT cache as the serve will
read it, and the `.pth` files of the installed distributions with whether Python reads them."""

from __future__ import annotations

from dataclasses import field
from typing import ClassVar

from dflash_doctor.facts.shape import Shape, frozen_dataclass

__all__ = ["CachedLibrary", "FlashinferJitCache", "KernelFiles", "PthFile", "PthLine"]


@frozen_dataclass(frozen=True)
class CachedLibrary(Shape):
    """One library FlashInfer's JIT built: the CUDA runtimes it needs (DT_NEEDED libcudart.so.N)."""

    path: str = ""
    size: int = 0
    cudart: list[str] = field(default_factory=list)
    error: str | None = None


@frozen_dataclass(frozen=True)
class FlashinferJitCache(Shape):
    """The JIT cache of the installed flashinfer-python: `<base>/.cache/flashinfer/<version>/`."""

    directory: str = ""
    """<base>/.cache/flashinfer: the user's cache, outside the environment."""
    base_from: str = ""
    """"FLASHINFER_WORKSPACE_BASE" or "HOME": where the base came from."""
    flashinfer_version: str | None = None
    version_dir: str = ""
    exists: bool = False
    libraries: list[CachedLibrary] = field(default_factory=list)
    """Those read (at most MAX_LIBRARIES, each at most MAX_LIBRARY_BYTES)."""
    found: int = 0
    """Libraries found, read or not."""
    skipped: list[str] = field(default_factory=list)
    """Why some were not read (not regular, too large, over the count)."""
    error: str | None = None
    torch_cuda: str | None = None
    """torch.version.cuda, from the installed torch/version.py (None: a CPU build, or no torch)."""
    torch_version: str | None = None


@frozen_dataclass(frozen=True)
class PthLine(Shape):
    """One line of a .pth file: a path line (joined to its directory) or an import line (code site would run)."""

    line: int = 0
    text: str = ""
    path: str | None = None
    """The directory a path line names (None for an import line)."""
    on_sys_path: bool = False
    exists: bool = False


@frozen_dataclass(frozen=True)
class PthFile(Shape):
    """A `.pth` file a distribution's RECORD lists at its top, and whether Python read it."""

    distribution: str = ""
    version: str | None = None
    location: str = ""
    name: str = ""
    file: str = ""
    processed: bool = True
    """Whether the directory is one site reads .pth files in."""
    location_kind: str = ""
    """How that directory came onto sys.path (the sys_path entry's kind: "pythonpath", "other", "site", ...)."""
    lines: list[PthLine] = field(default_factory=list)
    error: str | None = None


@frozen_dataclass(frozen=True)
class KernelFiles(Shape):
    SECTION: ClassVar[str] = "kernel_files"

    flashinfer_cache: FlashinferJitCache | None = None
    """None without flashinfer-python."""
    pth_files: list[PthFile] = field(default_factory=list)
