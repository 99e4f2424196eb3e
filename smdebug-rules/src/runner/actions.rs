//! What happens when a rule fires or its status changes: its actions (stop training, webhook,
//! e-mail, command) are carried out through an [`ActionContext`], once at its first firing, or
//! at every status change for those configured so ([`Trigger::StatusChange`]); an action that
//! fails is recorded in the rule's status and does not stop the runner.

use crate::actions::{ActionConfig, ActionContext, RuleEvent, StatusChange, Trigger, execute};
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
#[derive(Clone)]
pub(super) struct Dispatcher {
    /// The run's location, as events name it.
    run: String,
    ctx: ActionContext,
}

impl Dispatcher {
    pub fn new(run: &smdebug_storage::Location, ctx: ActionContext) -> Dispatcher {
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
            change: None,
        };
        self.carry_out(actions, Trigger::FirstFiring, &event, status);
    }

    /// The status of `status` changed as `change` says (the rules had evaluated up to `step`):
    /// carries out its actions that are triggered by status changes.
    pub fn changed(
        &self,
        actions: &SlotActions,
        status: &mut RuleStatus,
        change: StatusChange,
        step: Option<u64>,
    ) {
        let event = RuleEvent {
            rule: status.rule.clone(),
            run: self.run.clone(),
            step: step.unwrap_or(0),
            message: status.message.clone(),
            evidence: status.evidence.clone(),
            change: Some(change),
        };
        self.carry_out(actions, Trigger::StatusChange, &event, status);
    }

    fn carry_out(
        &self,
        actions: &SlotActions,
        trigger: Trigger,
        event: &RuleEvent,
        status: &mut RuleStatus,
    ) {
        for a in actions.list.iter().filter(|a| a.trigger() == trigger) {
            if let Err(e) = execute(a, event, &self.ctx) {
                status.action_errors.push(e.to_string());
            }
        }
    }
}
