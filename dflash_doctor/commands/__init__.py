"""Subcommands that live in their own modules: `dflash-doctor NAME ...` calls
`dflash_doctor.commands.NAME.main(argv) -> exit code` (see `dflash_doctor.cli.MODULE_COMMANDS`)."""
