"""The fix subsystem: what `dflash-doctor fix` and the run's dry runs share. The judge of the installer's dry
runs (`verify`), the plan of the steps a fix takes over them (`plan`), and the snapshot that lets a fix be
undone (`snapshot`, read back safely by `snapshot_schema`). The command itself is `dflash_doctor.commands.fix`."""
