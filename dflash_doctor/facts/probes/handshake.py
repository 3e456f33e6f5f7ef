# Probe: runs inside the TARGET interpreter, standard library only. Unlike the other probes it also parses
# and runs on interpreters older than 3.8 (even 2.7): its answer is how the doctor tells the user that an
# interpreter is too old for the others, instead of their SyntaxErrors.
# It answers the doctor's handshake: which implementation and version this interpreter is.
import platform
import sys

# The prelude's MYPY, which is False as this runs and which the type checker takes as True: this script parses on
# Python 2.7, which has no typing.TYPE_CHECKING.
if MYPY:  # type: ignore[name-defined]  # noqa: F821
    from ._prelude import emit

emit({
    "implementation": platform.python_implementation(),
    "version": list(sys.version_info[:3]),
    "executable": sys.executable,
})
