"""Notebook-style example: read the demo's run and plot the training loss and one gradient's
norm with matplotlib.

    cargo run --release -p smdebug-examples --bin demo      # writes target/smdebug-demo/run
    pip install ./smdebug-py matplotlib
    python smdebug-py/examples/plot_demo_run.py [RUN] [OUT.png]

Each cell below is what a notebook would hold; only the import differs from Python smdebug.
"""

import sys

import matplotlib

matplotlib.use("Agg")  # no display needed; a notebook shows the figure inline instead
import matplotlib.pyplot as plt
import numpy as np

from smdebug_rs import modes
from smdebug_rs.trials import create_trial

run = sys.argv[1] if len(sys.argv) > 1 else "target/smdebug-demo/run"
out = sys.argv[2] if len(sys.argv) > 2 else "demo-run.png"

# %% Open the run and look around.
trial = create_trial(run)
print("steps:", len(trial.steps()), "modes:", [m.name for m in trial.modes()], "workers:", trial.workers())
print("collections:", sorted(trial.collections()))

# %% The training loss, by TRAIN step.
loss_name = trial.tensor_names(collection="losses")[0]
loss = trial.tensor(loss_name).values(mode=modes.TRAIN)
loss_steps = sorted(loss)
loss_values = [float(loss[s]) for s in loss_steps]

# %% The L2 norm of one gradient: the saved reduction when the hook wrote one, else computed.
grad_name = trial.tensor_names(collection="gradients")[0]
grad = trial.tensor(grad_name)
grad_steps = grad.steps(mode=modes.TRAIN)
grad_norms = []
for s in grad_steps:
    try:
        grad_norms.append(float(grad.reduction_value(s, "l2", mode=modes.TRAIN)))
    except Exception:  # only other reductions saved at this step
        grad_norms.append(float(np.linalg.norm(grad.value(s, mode=modes.TRAIN))))

# %% Plot both.
fig, (ax_loss, ax_grad) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
ax_loss.plot(loss_steps, loss_values)
ax_loss.set_ylabel(loss_name)
ax_loss.set_title(f"{run}")
ax_grad.plot(grad_steps, grad_norms, color="tab:orange")
ax_grad.set_ylabel(f"|{grad_name}|₂")
ax_grad.set_xlabel("TRAIN step")
fig.tight_layout()
fig.savefig(out, dpi=100)
print(f"wrote {out}: {len(loss_steps)} loss values, {len(grad_steps)} norms of {grad_name}")
