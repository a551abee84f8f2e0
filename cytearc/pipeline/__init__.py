"""Pipeline runs: recipes of stages, their records in the store, and their label claims.

The records of a run live below ``pipeline/runs`` of the store root
(:mod:`cytearc.pipeline.ledger`) in one strict, unversioned shape
(:mod:`cytearc.pipeline.records`); each stage also records the sampled RSS of
the process tree that ran it (:mod:`cytearc.pipeline.rss`).
"""
