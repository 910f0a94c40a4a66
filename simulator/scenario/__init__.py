"""The scenario language: scenario files and where they are (``catalogue``), their
validation and expansion into runs with their keys (``scenario``), the grid (``axes``), the
``[deployment]`` table (``deployment``) and which scenario a results directory holds
(``identity``)."""
