"""The built-in checks, one package per layer of the stack (python, gpu, models, serve, fabric, live, fix), over
two modules they all share: `remedy` (the installer and remediation commands) and `argv` (the user's command
with one flag changed). `dflash_doctor.registry.BUILTIN_CHECKS` lists the check classes."""
