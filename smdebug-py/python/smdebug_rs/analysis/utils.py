"""``smdebug.analysis.utils``: turning a trial's refresh off and on for a block.

``with no_refresh(trial):`` (one trial or a list) sets ``trial.dynamic_refresh = False``: inside
the block, queries answer from what the trial had read, and steps written meanwhile are not
seen; after it, refresh is on again. ``refresh(trials)`` does the opposite. These are smdebug's
own semantics (smdebug's ``no_refresh`` works on ``smdebug_rs`` trials too: it sets the same
attribute); like smdebug's, the block turns refresh on (``no_refresh``) or off (``refresh``)
afterwards, whatever it was before, and not when the block raises.
"""

import re
from contextlib import contextmanager


def _each(trials):
    return trials if isinstance(trials, list) else [trials]


@contextmanager
def no_refresh(trials):
    for trial in _each(trials):
        trial.dynamic_refresh = False
    yield trials
    for trial in _each(trials):
        trial.dynamic_refresh = True


@contextmanager
def refresh(trials):
    for trial in _each(trials):
        trial.dynamic_refresh = True
    yield trials
    for trial in _each(trials):
        trial.dynamic_refresh = False


def _tensor_name_sorter(t_name):
    # smdebug's: sorts names by their numerical suffix (`input_3` after `input_2`).
    if not bool(re.match(r".+_\d+", t_name)):
        t_name = f"{t_name}_0"
    return int(t_name.split("_")[-1])


def parse_list_from_str(arg, delimiter=","):
    """A list from a ``delimiter``-separated string (or a list, returned as is; None is [])."""
    if arg is None:
        return []
    if isinstance(arg, str):
        return arg.split(delimiter) if arg else []
    if isinstance(arg, list):
        return arg
    raise TypeError(f"a string or a list, not {arg!r}")


def parse_bool(arg, default):
    """A rule parameter as a bool: None is ``default``; True/False or their names."""
    if arg is None:
        return default
    if arg in [False, True]:
        return arg
    if arg in ["False", "false"]:
        return False
    if arg in ["True", "true"]:
        return True
    raise ValueError("boolean argument expected, but found {}".format(arg))
