"""``python -m cytearc.tools.repack_zarr IN OUT [--profile NAME] [--data-only]``.

The command line of :func:`cytearc.tools.repack_zarr` (implemented in
:mod:`cytearc.tools.repack`; this module only runs it, so that the function
keeps the name ``cytearc.tools.repack_zarr``).
"""

import sys

from cytearc.tools.repack import main

if __name__ == "__main__":
    sys.exit(main())
