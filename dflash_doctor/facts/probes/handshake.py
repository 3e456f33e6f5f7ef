# Probe: runs inside the TARGET interpreter, standard library only. Unlike the other probes it also parses
# and runs on interpreters older than 3.8 (even 2.7): its answer is how the doctor tells the user that an
# interpreter is too old for the others, instead of their SyntaxErrors.
# It answers the doctor's handshake: which implementation and version this interpreter is.
import json
import platform
import sys

MARKER = "@@dflash-doctor-facts@@"

sys.stdout.write(MARKER + "\n")
sys.stdout.write(json.dumps({
    "implementation": platform.python_implementation(),
    "version": list(sys.version_info[:3]),
    "executable": sys.executable,
}) + "\n")
sys.stdout.flush()
