from clusteremu.cli import main

raise SystemExit(main())
