"""smdebug's ``smdebug.core`` import paths: ``smdebug_rs.core.modes`` and
``smdebug_rs.core.tensor``."""
