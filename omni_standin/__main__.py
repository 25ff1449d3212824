"""`python -m omni_standin MODEL [flags]`: see `omni_standin.cli`."""

import contextlib

from omni_standin.cli import main

with contextlib.suppress(KeyboardInterrupt):
    raise SystemExit(main())
