# Probe: runs inside the TARGET interpreter, standard library only, Python 3.8+.
# Where this interpreter's `vllm` console script is: the one the installed vLLM distribution's RECORD lists (a
# file named vllm in a bin/ directory, that resolves inside the environment: a RECORD line may lead anywhere), and
# this interpreter's install-scheme scripts directory.
import os
import sys
import sysconfig
from typing import TYPE_CHECKING, List

if TYPE_CHECKING:  # the prelude's, which probe_source puts before this script
    from ._prelude import _under, emit, own_roots

recorded: List[str] = []
try:
    from importlib import metadata

    dist = metadata.distribution("vllm")
    roots = own_roots()  # this interpreter's sys.path and install scheme, real paths
    for entry in dist.files or []:
        if entry.name == "vllm" and entry.parent.name == "bin":
            path = os.path.normpath(str(dist.locate_file(entry)))
            real = os.path.realpath(path)
            if any(_under(real, root) for root in roots):
                recorded.append(path)
except Exception:  # noqa: BLE001 - no vLLM distribution, or unreadable metadata: the scripts directory alone
    recorded = []
emit({"recorded": recorded[:8], "scripts": sysconfig.get_path("scripts"), "executable": sys.executable})
