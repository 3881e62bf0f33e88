"""`python -m diagym.analysis.cli` is `diagym`."""

from diagym.analysis.cli.main import main

raise SystemExit(main())
