//! What happens when a rule fires: its actions (stop training, webhook, e-mail, command) are
//! carried out once, at its first firing, through an [`ActionContext`]; an action that fails
//! is recorded in the rule's status and does not stop the runner.

use crate::actions::{ActionConfig, ActionContext, RuleEvent, execute};
use crate::rule::RuleResult;
use crate::status::RuleStatus;

/// One rule's actions, and whether they were carried out.
pub(super) struct SlotActions {
    list: Vec<ActionConfig>,
    done: bool,
}

impl SlotActions {
    pub fn new(list: Vec<ActionConfig>) -> SlotActions {
        SlotActions { list, done: false }
    }

    /// The configured actions' types, as the status lists them.
    pub fn kinds(&self) -> Vec<String> {
        self.list.iter().map(|a| a.kind().to_string()).collect()
    }
}

/// Carries out the actions of the rules of one run.
pub(super) struct Dispatcher {
    /// The run's location, as events name it.
    run: String,
    ctx: ActionContext,
}

impl Dispatcher {
    pub fn new(run: &str, ctx: ActionContext) -> Dispatcher {
        Dispatcher {
            run: run.to_string(),
            ctx,
        }
    }

    /// The rule of `status` fired with `result` (at `step`): carries out its actions unless
    /// they were carried out already; failures go to `status.action_errors`.
    pub fn fired(
        &self,
        actions: &mut SlotActions,
        status: &mut RuleStatus,
        result: &RuleResult,
        step: Option<u64>,
    ) {
        if actions.done || actions.list.is_empty() {
            return;
        }
        actions.done = true;
        let event = RuleEvent {
            rule: status.rule.clone(),
            run: self.run.clone(),
            step: step.unwrap_or(0),
            message: result.message.clone(),
            evidence: result.evidence.clone(),
        };
        for a in &actions.list {
            if let Err(e) = execute(a, &event, &self.ctx) {
                status.action_errors.push(e.to_string());
            }
        }
    }
}
