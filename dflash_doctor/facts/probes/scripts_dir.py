# Probe: runs inside the TARGET interpreter, standard library only, Python 3.8+.
# Where this interpreter's `vllm` console script is: the one the installed vLLM distribution's RECORD lists (a
# file named vllm in a bin/ directory, that resolves inside the environment: a RECORD line may lead anywhere), and
# this interpreter's install-scheme scripts directory.
import json
import os
import sys
import sysconfig

MARKER = "@@dflash-doctor-facts@@"

recorded = []
try:
    from importlib import metadata

    dist = metadata.distribution("vllm")
    roots = own_roots()  # noqa: F821 - the prelude's: this interpreter's sys.path and install scheme, real paths
    for entry in dist.files or []:
        if entry.name == "vllm" and entry.parent.name == "bin":
            path = os.path.normpath(str(dist.locate_file(entry)))
            real = os.path.realpath(path)
            if any(_under(real, root) for root in roots):  # noqa: F821 - the prelude's
                recorded.append(path)
except Exception:  # noqa: BLE001 - no vLLM distribution, or unreadable metadata: the scripts directory alone
    recorded = []
sys.stdout.write(MARKER + "\n" + json.dumps({"recorded": recorded[:8], "scripts": sysconfig.get_path("scripts"),
                                             "executable": sys.executable}) + "\n")
sys.stdout.flush()
