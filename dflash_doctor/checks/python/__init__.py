"""The Python layer: the target's distributions, the flash-attn v2/v4 namespace, the imports vLLM makes and the extensions they load."""

from __future__ import annotations

from dflash_doctor.checks.python.distributions import CODES as _distributions_codes
from dflash_doctor.checks.python.distributions import DistributionsCheck
from dflash_doctor.checks.python.imports import CODES as _imports_codes
from dflash_doctor.checks.python.imports import ExtensionsCheck, ImportSurfaceCheck, RotaryImportCheck
from dflash_doctor.checks.python.namespaces import CODES as _namespaces_codes
from dflash_doctor.checks.python.namespaces import NamespaceCheck
from dflash_doctor.codes import Code

__all__ = ["CODES", "DistributionsCheck", "RotaryImportCheck", "ImportSurfaceCheck", "ExtensionsCheck", "NamespaceCheck"]

CODES: tuple[Code, ...] = (*_distributions_codes, *_imports_codes, *_namespaces_codes)
