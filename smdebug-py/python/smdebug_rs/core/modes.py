"""``smdebug.core.modes``: ``ModeKeys`` (smdebug's own class when smdebug is installed)."""

from .._modes import ALLOWED_MODE_NAMES, ALLOWED_MODES, ModeKeys, str_to_mode_keys

__all__ = ["ALLOWED_MODES", "ALLOWED_MODE_NAMES", "ModeKeys", "str_to_mode_keys"]
