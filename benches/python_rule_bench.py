#!/usr/bin/env python3
"""The Python side of the rules comparison: `python3 benches/python_rule_bench.py RUN`.

smdebug 1.0.34 on PyPI does not ship SageMaker's built-in rules (they lived in the rules
container), so this defines three with SageMaker's definitions and defaults on smdebug's own
`Rule` base class and runs them with `invoke_rule` over every step, as the rules container did:
VanishingGradient (mean |gradient| < 1e-7), ExplodingTensor (any NaN or Inf in any tensor),
AllZero (100 % zeros in weights, gradients, outputs). The Rust side is `rules_bench RUN`.
"""
import os
import sys
import time

os.environ.setdefault("SMDEBUG_LOG_LEVEL", "error")
import numpy as np  # noqa: E402
from smdebug.rules.rule import Rule  # noqa: E402
from smdebug.rules.rule_invoker import invoke_rule  # noqa: E402
from smdebug.trials import create_trial  # noqa: E402
from smdebug.exceptions import RuleEvaluationConditionMet  # noqa: E402


class VanishingGradient(Rule):
    def __init__(self, base_trial, threshold=1e-7):
        super().__init__(base_trial, action_str="")
        self.threshold = float(threshold)
        self.fired = 0

    def invoke_at_step(self, step):
        for t in self.base_trial.tensor_names(collection="gradients"):
            v = self.base_trial.tensor(t).value(step)
            if np.mean(np.abs(v)) < self.threshold:
                self.fired += 1
                return True
        return False


class ExplodingTensor(Rule):
    def __init__(self, base_trial, only_nan=False):
        super().__init__(base_trial, action_str="")
        self.only_nan = only_nan
        self.fired = 0

    def invoke_at_step(self, step):
        for t in self.base_trial.tensor_names():
            v = self.base_trial.tensor(t).value(step)
            bad = np.isnan(v).any() if self.only_nan else (~np.isfinite(v)).any()
            if bad:
                self.fired += 1
                return True
        return False


class AllZero(Rule):
    def __init__(self, base_trial, threshold=100.0):
        super().__init__(base_trial, action_str="")
        self.threshold = float(threshold)
        self.fired = 0

    def invoke_at_step(self, step):
        # The same default selection as ours: weights, gradients and layer outputs (biases start
        # at zero and a loss or metric of 0 is legitimate).
        names = set()
        for c in ("weights", "gradients", "outputs"):
            try:
                names.update(self.base_trial.tensor_names(collection=c))
            except Exception:
                pass
        for t in sorted(names):
            v = self.base_trial.tensor(t).value(step)
            if v.size and 100.0 * np.count_nonzero(v == 0) / v.size >= self.threshold:
                self.fired += 1
                return True
        return False


run = sys.argv[1]
t0 = time.perf_counter()
trial = create_trial(run)
steps = trial.steps()
rules = [VanishingGradient(trial), ExplodingTensor(trial), AllZero(trial)]
for r in rules:
    invoke_rule(r, start_step=0, end_step=steps[-1] + 1)
secs = time.perf_counter() - t0
fired = sum(1 for r in rules if r.fired)
print(f"python smdebug invoke_rule: 3 rules (VanishingGradient, ExplodingTensor, AllZero) over "
      f"{len(steps)} steps: {secs:.3f} s, {fired} fired")
