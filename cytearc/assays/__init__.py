"""Assay classes by type and their normalization."""
