# Probe: runs inside the TARGET interpreter, standard library only, Python 3.8+.
# Where this interpreter's installers put console scripts (`vllm`): its install scheme's scripts directory.
import json
import sys
import sysconfig

MARKER = "@@dflash-doctor-facts@@"

sys.stdout.write(MARKER + "\n" + json.dumps({"scripts": sysconfig.get_path("scripts"),
                                             "executable": sys.executable}) + "\n")
sys.stdout.flush()
