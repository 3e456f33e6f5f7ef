from dflash_doctor.cli import main

raise SystemExit(main())
