"""smdebug's ``smdebug.trials`` API on the Rust reader.

``from smdebug_rs.trials import create_trial`` replaces ``from smdebug.trials import
create_trial``: the same methods, arguments, defaults, step numbering (GLOBAL steps unless a
mode is given, then steps counted within that mode) and exceptions.
"""

import logging
import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _native
from ._modes import ModeKeys, ModeLike, StepState, mode_key, mode_name
from .exceptions import (
    ShapeUnavailableForStep,
    SMDebugValueError,
    TensorUnavailable,
    TensorUnavailableForStep,
)

_logger = logging.getLogger("smdebug_rs")


def _python_regex_error(pattern: str) -> Optional[str]:
    """Why Python's ``re`` rejects ``pattern``, or None when it compiles (``re`` caches it)."""
    try:
        re.compile(pattern)
        return None
    except (re.error, TypeError) as e:
        return str(e)

REDUCTIONS_PREFIX = "smdebug/reductions/"
# smdebug's ReductionConfig: ALLOWED_REDUCTIONS and ALLOWED_NORMS.
ALLOWED_REDUCTIONS = ["min", "max", "mean", "std", "variance", "sum", "prod"]
ALLOWED_NORMS = ["l1", "l2"]


def create_trial(
    path: str,
    name: Optional[str] = None,
    range_steps=None,
    wait_for_collections: bool = True,
    max_tensor_bytes: Optional[int] = None,
    map_files: bool = False,
    read_ahead: bool = True,
    **kwargs,
) -> "Trial":
    """Opens the run at ``path``: a directory or an object-store URL (``s3://bucket/run``,
    ``gs://…``, ``az://…``), with credentials from the environment as the Rust reader takes
    them.

    ``range_steps=(begin, end)`` reads only global steps ``begin <= step < end`` (either may be
    None), as smdebug does. Like smdebug's ``create_trial``, it waits until the run's
    collections files are all there (``wait_for_collections=False``, an extension, opens with
    what the run holds) and raises ``MissingCollectionFiles`` when the run ended without them;
    ``SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW`` is read as smdebug reads it. The other keyword
    arguments smdebug accepts for its own reader (``parallel``, ``check``, ``index_mode``,
    ``cache``) are accepted and have no effect.

    ``max_tensor_bytes`` (an extension): the most bytes reading one value may allocate, its
    decoded bytes and the numpy array it becomes counted together, before anything is decoded
    (default 1 GiB). A value over it raises ``TensorTooLarge``, a ``MemoryError`` naming the
    event file, the tensor and the size. ``map_files=True`` (an extension) memory-maps the
    event files instead of reading them: a little faster on large runs, but a file cut short in
    place while mapped (``cp`` over a run) kills the interpreter with SIGBUS.

    ``read_ahead`` (an extension, on by default): once a tensor's values are read step after
    step (``for s in steps: tensor.value(s)``), the values of its next steps are looked up and
    decoded together on other threads, up to 512 of them or 16 MiB of files and values, and
    the next calls take them without a lookup (after a refresh that read new index files, they
    are looked up again); the event files read for them are kept (within 256 MiB), so a loop
    going tensor after tensor reads each file once. What a read gives is the same either way (a value that could not be
    read ahead is read when it is asked for, with the error it has then); ``read_ahead=False``
    reads each file only when a value in it is asked for."""
    return Trial(
        path,
        name=name,
        range_steps=range_steps,
        wait_for_collections=wait_for_collections,
        max_tensor_bytes=max_tensor_bytes,
        map_files=map_files,
        read_ahead=read_ahead,
    )


def _range_ends(range_steps) -> Tuple[Optional[int], Optional[int]]:
    """``range_steps`` checked as smdebug asserts it (non-negative ints or None)."""
    if range_steps is None:
        return None, None
    begin, end = range_steps[0], range_steps[1]
    for x in (begin, end):
        assert x is None or (isinstance(x, int) and x >= 0), (
            "range_steps should be of the form (begin, end) with non-negative integers or None"
        )
    return begin, end


def reduction_tensor_name(tname: str, reduction_name: str, abs: bool) -> str:
    """The stored name of a reduction (``smdebug.core.reductions.get_reduction_tensor_name``)."""
    name = re.sub(r":\d+", "", f"{reduction_name}/{tname}")
    if abs:
        name = "abs_" + name
    return REDUCTIONS_PREFIX + name


def numpy_reduction(reduction_name: str, data, abs: bool = False):
    """A reduction computed from a value, as smdebug computes one that was not saved."""
    if reduction_name not in ALLOWED_REDUCTIONS and reduction_name not in ALLOWED_NORMS:
        raise SMDebugValueError("Invalid reduction type %s" % reduction_name)
    if abs:
        data = np.absolute(data)
    if reduction_name in ("min", "max"):
        return getattr(np, "a" + reduction_name)(data)
    if reduction_name in ALLOWED_REDUCTIONS:
        return getattr(np, "var" if reduction_name == "variance" else reduction_name)(data)
    if np.isscalar(data):
        data = [data]
    return np.linalg.norm(data, ord=int(reduction_name[1]))


class Collection:
    """A collection as the run's collections file describes it."""

    def __init__(self, doc: dict):
        self.name: str = doc["name"]
        self.include_regex: List[str] = list(doc.get("include_regex") or [])
        self.tensor_names = set(doc.get("tensor_names") or [])
        self.reduction_config = doc.get("reduction_config")
        self.save_config = doc.get("save_config")
        self.save_histogram = doc.get("save_histogram")

    @property
    def tensor_names_list(self) -> List[str]:
        return sorted(self.tensor_names)

    def __repr__(self):
        return (
            f"<Collection {self.name}: tensor_names={sorted(self.tensor_names)}, "
            f"include_regex={self.include_regex}>"
        )


class Trial:
    """A run, opened for reading. See ``create_trial``."""

    def __init__(
        self,
        path: str,
        name: Optional[str] = None,
        range_steps=None,
        wait_for_collections: bool = False,
        max_tensor_bytes: Optional[int] = None,
        map_files: bool = False,
        read_ahead: bool = True,
    ):
        path = path.strip()
        self.path = path
        self.name = name if name is not None else os.path.basename(path.rstrip("/"))
        self.range_steps = range_steps
        begin, end = _range_ends(range_steps)
        window = int(os.getenv("SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW", "1000"))
        if max_tensor_bytes is not None and (
            isinstance(max_tensor_bytes, bool) or not isinstance(max_tensor_bytes, int) or max_tensor_bytes < 0
        ):
            raise SMDebugValueError(f"max_tensor_bytes must be a non-negative int, not {max_tensor_bytes!r}")
        self._native = _native.NativeTrial(
            path, begin, end, window, wait_for_collections, max_tensor_bytes, bool(map_files), bool(read_ahead)
        )
        self._tensors: Dict[str, Tensor] = {}
        self._warned: set = set()
        self._log_warnings()

    def _log_warnings(self) -> List[str]:
        found = self._warnings()
        for key, line in found:
            if key not in self._warned:
                # Each once, on the "smdebug_rs" logger (smdebug logs on its own logger too).
                _logger.warning("%s: %s", self.path, line)
                self._warned.add(key)
        return [line for _, line in found]

    def _warnings(self) -> List[Tuple[str, str]]:
        # `(key, line)` each: the key stays the same while the line may grow (a name repeated
        # in more index files of a live run is counted in its line, and not logged again).
        # Collection regexes are Python's own here (see _tensors_in_collection): only those
        # Python's `re` rejects as well are left out of a collection.
        found = []
        for collection, pattern, _ in self._native.unusable_patterns():
            error = _python_regex_error(pattern)
            if error is not None:
                line = (
                    f"collection `{collection}`: regex `{pattern}` is ignored ({error}); the "
                    "collection keeps the tensor names its file lists"
                )
                found.append((line, line))
        return found + self._native.repeated_names()

    def warnings(self) -> List[str]:
        """What reading had to work around, one line each: a regex in the run's collections
        files that Python's ``re`` does not compile (its collection keeps the tensor names the
        files list; smdebug would raise), a tensor listed twice in one index file (its later
        entry is read, as smdebug does; one line per name, however many index files repeat it).
        Each is also logged once on the ``smdebug_rs`` logger, when first seen."""
        return self._log_warnings()

    def __repr__(self):
        return (
            f"<smdebug_rs.trials.Trial object at {hex(id(self))}>:(\n"
            f"    name={self.name},\n"
            f"    path={self.path},\n"
            f"    steps={self.steps()},\n"
            f"    collections={list(self.collections().keys())},\n"
            f"    tensor_names={self.tensor_names()},\n"
            f")"
        )

    # ---- where the run stands ----

    def refresh(self) -> None:
        """Looks for new steps, workers and the end of training now (queries also do this on
        their own while ``dynamic_refresh`` is on: see the Rust ``Trial``'s docs)."""
        self._native.refresh()
        self._log_warnings()

    @property
    def dynamic_refresh(self) -> bool:
        """Whether queries look for new steps, tensors and workers (smdebug's attribute, True
        at opening). Set it False, or use ``smdebug_rs.analysis.utils.no_refresh(trial)`` (or
        smdebug's own ``no_refresh``), and queries answer from what the trial had read, as if
        nothing had been written since; ``refresh()`` and ``wait_for_steps`` still look."""
        return self._native.auto_refresh()

    @dynamic_refresh.setter
    def dynamic_refresh(self, on: bool) -> None:
        self._native.set_auto_refresh(bool(on))

    @property
    def loaded_all_steps(self) -> bool:
        """True once the run wrote its end marker and every step is loaded (every step is
        then complete)."""
        return self._native.is_complete()

    def is_complete(self) -> bool:
        """Whether the run wrote its end marker (``training_job_end.ts``)."""
        return self._native.is_complete()

    def end_reason(self) -> Optional[str]:
        """Why the run ended, when its end marker says (runs written by smdebug for Rust)."""
        return self._native.end_reason()

    @property
    def num_workers(self) -> int:
        return self._native.num_workers()

    @property
    def last_complete_step(self) -> int:
        """The last global step every worker wrote (-1 for none), as smdebug's attribute."""
        last = self._native.last_complete_step()
        return -1 if last is None else last

    def has_passed_step(self, step: int, mode: ModeLike = ModeKeys.GLOBAL) -> StepState:
        return StepState[self._native.has_passed_step(step, mode_name(mode))]

    def wait_for_steps(
        self,
        required_steps: Sequence[int],
        mode: ModeLike = ModeKeys.GLOBAL,
        timeout: Optional[float] = None,
    ) -> None:
        """Waits until every step in ``required_steps`` is available. Raises StepUnavailable
        for a step that will never come and NoMoreData for one past the end of a finished run,
        as smdebug does; with ``timeout`` (seconds; smdebug waits forever), raises
        StepNotYetAvailable when a step is still not there after it."""
        self._native.wait_for_steps(list(required_steps), mode_name(mode), timeout)

    # ---- steps, modes, workers ----

    def steps(self, mode: ModeLike = ModeKeys.GLOBAL, show_incomplete_steps: bool = False) -> List[int]:
        """Steps in ``mode`` (global steps for GLOBAL); only those every worker wrote unless
        ``show_incomplete_steps``."""
        return self._native.steps(mode_name(mode), show_incomplete_steps)

    def modes(self) -> List[ModeKeys]:
        """The modes the run recorded steps in (never GLOBAL)."""
        return [ModeKeys[m] for m in self._native.modes() if m != "GLOBAL"]

    def workers(self) -> List[str]:
        return self._native.workers()

    def global_step(self, mode: ModeLike, mode_step: int) -> Optional[int]:
        return self._native.global_step(mode_name(mode), mode_step)

    def mode_modestep(self, global_step: int) -> Tuple[Optional[ModeKeys], Optional[int]]:
        found = self._native.mode_modestep(global_step)
        if found is None:
            return None, None
        return ModeKeys[found[0]], found[1]

    def mode_step(self, global_step: int) -> Optional[int]:
        return self.mode_modestep(global_step)[1]

    def mode(self, global_step: int) -> Optional[ModeKeys]:
        return self.mode_modestep(global_step)[0]

    # ---- collections and tensor names ----

    def collections(self) -> Dict[str, Collection]:
        return {c["name"]: Collection(c) for c in self._native.collections()}

    def collection(self, coll_name: str) -> Collection:
        """The collection of that name; an empty one for a name the run does not have (smdebug's
        CollectionManager creates it; here it is not added to ``collections()``)."""
        collections = self.collections()
        if coll_name not in collections:
            return Collection({"name": coll_name})
        return collections[coll_name]

    def _tensors_in_collection(self, collection, names: List[str]) -> set:
        coll = self.collection(collection if isinstance(collection, str) else collection.name)
        found = set(coll.tensor_names)
        # A pattern Python rejects selects nothing (a warning, see warnings()), where smdebug
        # would raise: the run's files are not the caller's to fix.
        patterns = [r for r in coll.include_regex if _python_regex_error(r) is None]
        if patterns:
            found.update(n for n in names if any(re.search(r, n) for r in patterns))
        return found

    def tensor_names(
        self,
        show_prefixed_tensors: bool = False,
        *,
        step: Optional[int] = None,
        mode: ModeLike = ModeKeys.GLOBAL,
        regex=None,
        collection=None,
    ) -> List[str]:
        """Tensor names, sorted; reductions are listed under their tensor's name. ``step`` and
        ``mode`` keep the tensors saved at that step / in that mode; ``regex`` (one pattern or
        a list, searched anywhere in the name) or ``collection`` (a name or a Collection)
        keep the matching ones."""
        if regex is not None and collection is not None:
            raise ValueError("Only one of `regex` or `collection` can be passed to this method")
        key = mode_key(mode)
        selected = set(self._native.tensor_names_in(step, None if key == ModeKeys.GLOBAL else key.name))
        if collection is not None:
            selected &= self._tensors_in_collection(collection, self._native.tensor_names())
        elif regex is not None:
            patterns = regex if isinstance(regex, list) else [regex]
            selected = {n for n in selected if any(re.search(p, n) for p in patterns)}
        return sorted(selected)

    def tensors(self, *args, **kwargs) -> List[str]:
        """``tensor_names``, under the name smdebug's documentation uses in its custom-rule
        example (``self.base_trial.tensors(collection="gradients")``; smdebug 1.0.34's Trial
        has only ``tensor_names``), so that example runs as written."""
        return self.tensor_names(*args, **kwargs)

    def has_tensor(self, tname: str) -> bool:
        return self._native.has_tensor(tname)

    def tensor(self, tname: str) -> "Tensor":
        if tname not in self._tensors:
            if not self._native.has_tensor(tname):
                raise TensorUnavailable(tname)
            self._tensors[tname] = Tensor(tname, self)
        return self._tensors[tname]


class Tensor(_native.NativeTensor):
    """One tensor of a trial (``trial.tensor(name)``).

    ``value(step_num, mode=ModeKeys.GLOBAL, worker=None)``, the value at a step as a numpy
    array of the stored dtype and shape, is the native base class's: a notebook calls it once
    per step, and it goes to the reader without a Python frame."""

    def __init__(self, name: str, trial: Trial):
        self.name = name
        self.trial = trial
        self._native = trial._native

    def __repr__(self):
        return f"<smdebug_rs.trials.Tensor {self.name}>"

    def steps(self, mode: ModeLike = ModeKeys.GLOBAL, show_incomplete_steps: bool = False) -> List[int]:
        return self._native.tensor_steps(self.name, mode_name(mode), show_incomplete_steps)

    def values(self, mode: ModeLike = ModeKeys.GLOBAL, worker: Optional[str] = None) -> Dict[int, np.ndarray]:
        """Every value in ``mode``, ``{step: array}``."""
        return self._native.values(self.name, mode_name(mode), worker)

    def shape(self, step_num: int, mode: ModeLike = ModeKeys.GLOBAL, worker: Optional[str] = None) -> tuple:
        try:
            return self.value(step_num, mode, worker).shape
        except TensorUnavailableForStep:
            raise ShapeUnavailableForStep(self.name, step_num, mode_key(mode)) from None

    def workers(self, step_num: int, mode: ModeLike = ModeKeys.GLOBAL) -> List[str]:
        workers = self._native.tensor_workers(self.name, step_num, mode_name(mode))
        if not workers:
            raise TensorUnavailableForStep(self.name, step_num, mode_key(mode))
        return workers

    def reduction_value(
        self,
        step_num: int,
        reduction_name: str,
        mode: ModeLike = ModeKeys.GLOBAL,
        worker: Optional[str] = None,
        abs: bool = False,
    ):
        """A reduction at a step: the saved one (``smdebug/reductions/...``), else computed
        from the saved value, as smdebug does."""
        stored = reduction_tensor_name(self.name, reduction_name, abs)
        if self._native.has_tensor(stored):
            try:
                return self._native.value(stored, step_num, mode_name(mode), worker)
            except TensorUnavailableForStep:
                pass
        try:
            value = self.value(step_num, mode, worker)
        except TensorUnavailableForStep:
            raise TensorUnavailableForStep(stored, step_num, mode_key(mode)) from None
        return numpy_reduction(reduction_name, value, abs)

    def reduction_values(
        self, step_num: int, mode: ModeLike = ModeKeys.GLOBAL, worker: Optional[str] = None
    ) -> Dict[Tuple[str, bool], np.ndarray]:
        """Every reduction saved at a step, ``{(reduction_name, abs): value}``."""
        out = {}
        for red in ALLOWED_REDUCTIONS + ALLOWED_NORMS:
            for abs_ in (False, True):
                stored = reduction_tensor_name(self.name, red, abs_)
                if not self._native.has_tensor(stored):
                    continue
                try:
                    out[(red, abs_)] = self._native.value(stored, step_num, mode_name(mode), worker)
                except TensorUnavailableForStep:
                    pass
        return out

    def prev_steps(self, step: int, n: Optional[int] = None, mode: ModeLike = ModeKeys.GLOBAL) -> List[int]:
        """Steps up to and including ``step``; the last ``n`` of them when ``n`` is given."""
        earlier = [s for s in self.steps(mode) if s <= step]
        return earlier[-n:] if n else earlier
