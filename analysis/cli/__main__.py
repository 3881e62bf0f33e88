"""`python -m analysis.cli` is `diagym`."""

from analysis.cli.main import main

raise SystemExit(main())
