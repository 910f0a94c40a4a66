"""A module only the curator-import test imports (``test_curator_imports``)."""
