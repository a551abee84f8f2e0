"""CyteArc: single-cell datasets in Zarr v3 stores, analysed out of core on Dask.

The storage, import and analysis layers arrive with the next issues; this
package currently provides its version and command line.
"""

from cytepool.cube.cube import package_version

__version__ = package_version()

__all__ = ["__version__"]
