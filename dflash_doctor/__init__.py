"""dflash-doctor: finds what would break `vllm serve` with DFlash speculative decoding, before it runs."""

import os as _os
import sys as _sys

__version__ = "0.1.0"


def _mount_checks_from_a_source_checkout() -> None:
    """Installed, the built-in checks are `dflash_doctor.checks`; in a source checkout they live in the
    sibling directory `checks/` (never a top-level `checks` package). Mount that directory under the
    package name, as an editable install would, so that `python -m dflash_doctor` run from a checkout
    (cwd first on sys.path) still finds them."""
    here = _os.path.dirname(_os.path.abspath(__file__))
    source = _os.path.join(_os.path.dirname(here), "checks")
    if _os.path.isdir(_os.path.join(here, "checks")) or not _os.path.isfile(_os.path.join(source, "__init__.py")):
        return
    if "dflash_doctor.checks" in _sys.modules:
        return
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "dflash_doctor.checks", _os.path.join(source, "__init__.py"), submodule_search_locations=[source]
    )
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    _sys.modules["dflash_doctor.checks"] = module
    spec.loader.exec_module(module)


_mount_checks_from_a_source_checkout()
