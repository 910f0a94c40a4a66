"""What a coalition can learn: the privacy audit's tests (``audit``, ``audit_batch``), the
floating-point attack on Laplace releases (``float_attack``), the per-run leakage attacks
(``leakage``) and the audit command's harness (``audit_harness``; on Dask, ``audit_dask``)."""
