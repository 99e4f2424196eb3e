"""``smdebug.rules.req_tensors``: the tensors and steps a rule declares it needs at a step
(``self.req_tensors.add(name, steps=[...])`` in ``set_required_tensors``), fetched before its
``invoke_at_step`` runs, as smdebug fetches them."""

from ..exceptions import TensorUnavailable


class RequiredTensors:
    """The required tensors of a rule, per trial (its base trial and its other trials)."""

    def __init__(self, base_trial, other_trials):
        self._per_trial = {base_trial: RequiredTensorsForTrial(base_trial)}
        for trial in other_trials or []:
            self._per_trial[trial] = RequiredTensorsForTrial(trial)
        self.base_trial = base_trial

    def add(self, name, steps, trial=None, should_match_regex=False):
        trial = self.base_trial if trial is None else trial
        self._per_trial[trial].add(name, steps, should_match_regex=should_match_regex)

    def get_tensor_steps(self, name, trial=None):
        return self._per_trial[self.base_trial if trial is None else trial].get_tensor_steps(name)

    def get_names(self, trial=None):
        return self._per_trial[self.base_trial if trial is None else trial].get_names()

    def get(self, trial=None):
        return self._per_trial[self.base_trial if trial is None else trial].get()

    def clear(self):
        for required in self._per_trial.values():
            required.clear()

    def fetch(self):
        for required in self._per_trial.values():
            required.fetch()


class RequiredTensorsForTrial:
    """The tensors and steps required of one trial."""

    def __init__(self, trial):
        self.trial = trial
        self._tensor_steps = {}
        self._tensors = {}

    def _add_steps_for_tensor(self, name, steps):
        if name not in self._tensor_steps:
            self._tensor_steps[name] = steps
        else:
            self._tensor_steps[name].extend(steps)
        if name not in self._tensors:
            self._tensors[name] = self.trial.tensor(name)

    def add(self, name, steps, should_match_regex=False):
        """Requires ``name`` (or, with ``should_match_regex``, every tensor matching it) at
        ``steps``; a name the trial does not have raises TensorUnavailable."""
        if should_match_regex:
            for match in self.trial.tensor_names(regex=[name]):
                self._add_steps_for_tensor(match, steps)
            return
        if not self.trial.has_tensor(name):
            raise TensorUnavailable(name)
        self._add_steps_for_tensor(name, steps)

    def get_tensor_steps(self, name):
        return self._tensor_steps[name]

    def get_names(self):
        return self._tensor_steps.keys()

    def get(self):
        return self._tensors.values()

    def clear(self):
        self._tensor_steps.clear()
        self._tensors.clear()

    def fetch(self):
        """Waits for every required step, then reads each required value: a value not saved
        raises (TensorUnavailableForStep, ...) before the rule runs."""
        required_steps = sorted({s for steps in self._tensor_steps.values() for s in steps})
        self.trial.wait_for_steps(required_steps)
        for name, steps in self._tensor_steps.items():
            tensor = self._tensors[name]
            for step in steps:
                tensor.value(step)
