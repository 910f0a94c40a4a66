"""Sweeps: scenario files, the runs they expand to, their execution (locally or on Dask), the
results directory (records, summary, plots, identity checks, ``verify``) and the audit command's
harness."""
