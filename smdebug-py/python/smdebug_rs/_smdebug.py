"""Python smdebug, when it is installed: ``smdebug_rs`` then shares its identity.

Notebooks keep smdebug's imports for what they catch and compare (``except
smdebug.exceptions.TensorUnavailable``, ``== smdebug.core.tensor.StepState.AVAILABLE``,
``smdebug.modes.TRAIN``). When ``smdebug`` imports, ``smdebug_rs``'s exceptions subclass its
classes of the same names and its ``ModeKeys`` and ``StepState`` are smdebug's own classes.
Without smdebug (or with ``SMDEBUG_RS_STANDALONE=1``), ``smdebug_rs`` has its own classes, with
the same names, members, values and messages.

Importing smdebug is what smdebug's users do anyway; it costs about a second on first import
and smdebug logs a line or two of its own while it loads.
"""

import importlib
import importlib.util
import os
from types import ModuleType
from typing import Optional


def _load() -> Optional[ModuleType]:
    if os.environ.get("SMDEBUG_RS_STANDALONE", "") not in ("", "0"):
        return None
    try:
        # Only an installed package: a directory named `smdebug` on the path (a checkout of
        # this project has one) is a namespace package, not smdebug, and is not imported.
        spec = importlib.util.find_spec("smdebug")
        if spec is None or spec.origin in (None, "namespace"):
            return None
        # smdebug 1.0.34 fails to import with numpy 2 / protobuf 5, in several ways.
        import smdebug.core.modes
        import smdebug.core.tensor
        import smdebug.exceptions
    except Exception:  # noqa: BLE001 - any failure to import means "not usable here"
        return None
    return smdebug


#: The ``smdebug`` package, or None when it is not installed (or does not import here).
smdebug = _load()


def class_of(module: str, name: str):
    """smdebug's ``<module>.<name>`` (``module`` under ``smdebug.``), or None without smdebug
    or when this version of smdebug does not have it."""
    if smdebug is None:
        return None
    try:
        return getattr(importlib.import_module(f"smdebug.{module}"), name)
    except (ImportError, AttributeError):
        return None
