"""What a coalition can learn: the privacy audit's tests (``audit``, ``audit_batch``), the
floating-point attack on Laplace releases (``float_attack``) and the per-run leakage attacks
(``leakage``)."""
