"""The Dagster layer: thin assets over `hier_pipeline`, their checks, jobs and the Definitions."""
