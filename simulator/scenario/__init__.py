"""The scenario language: scenario files and where they are (``catalogue``), their reading,
overrides and validation (``scenario``), each table's schema and check (``tables``), the
validated scenario's expansion into runs with their keys (``runs``), the grid (``axes``), the
``[deployment]`` table (``deployment``) and which scenario a results directory holds
(``identity``)."""
