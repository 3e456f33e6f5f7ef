"""Built-in checks, one module per layer of the stack (installed as dflash_doctor.checks)."""
