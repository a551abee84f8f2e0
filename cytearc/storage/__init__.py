"""The Zarr v3 layout of a CyteArc store: count arrays, their dtype and layout, identity."""
