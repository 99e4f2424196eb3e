"""smdebug's ``smdebug.analysis`` import path: ``smdebug_rs.analysis.utils``."""
