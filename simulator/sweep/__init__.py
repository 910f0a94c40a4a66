"""Sweeps: a scenario's runs executed, locally or on Dask (``runner``, ``execute``,
``engine_dask``), resumed (``spending``, ``interrupt``), reported (``reporting``) and re-executed
(``verify``)."""
