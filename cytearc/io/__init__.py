"""Importers and exporters: 10x (HDF5 and Matrix Market), H5AD, CSV and in-memory matrices."""
