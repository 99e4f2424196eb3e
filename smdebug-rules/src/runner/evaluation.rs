//! Evaluation: one slot per rule (the rule, what it needs, its actions and its status), the
//! debugging rules stepped over the trial's steps, the profiler rules' results over a window
//! recorded, and the verdicts once the run is over.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use smdebug_core::Mode;
use smdebug_read::follow::DataProblem;
use smdebug_read::trial::{StepState, Trial};

use super::actions::{Dispatcher, SlotActions};
use super::run::RunSource;
use crate::actions::{ActionConfig, StatusChange};
use crate::error::{Error, Result};
use crate::profiler::{Details, ProfilerWindow, StepTimeline};
use crate::recorded::{Parameters, RuleDetails};
use crate::report::{ReportOutcome, is_profiler_report, report_verdict};
use crate::rule::{Needs, ProfilerNeeds, Rule, RuleInput, RuleResult};
use crate::status::{
    MAX_LISTED_UNREADABLE, ProfilerSeen, RuleStatus, Status, profiler_no_data_reason,
    tensor_no_data_reason,
};
use crate::unreadable::collecting;
use crate::window::JudgedWindow;

/// How many global steps the runner lets the rules' look-back move on by before it lets the
/// trial go of the steps behind it, while it evaluates a batch of steps (and at the end of each
/// batch): each release walks every tensor name's steps, so a run of thousands of tensors is
/// not walked at every step, and what is held past the look-back stays a few hundred KB.
const RELEASE_EVERY: u64 = 1000;

/// What the runner handed a rule when it returned a result.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Handed {
    /// A step of the run (debugging rules): it counts in the rule's steps.
    Step,
    /// The news that no step came for a while (debugging rules): no step of the run.
    Idle,
    /// A window of profiler data (profiler rules).
    Window,
}

/// What a rule declared it consumes.
enum Declared {
    Tensors(Needs),
    Profiler(ProfilerNeeds),
}

/// One rule as the runner keeps it.
pub(super) struct Slot {
    pub rule: Rule,
    /// What the rule consumes, asked once when the runner is built.
    needs: Declared,
    actions: SlotActions,
    pub status: RuleStatus,
    /// The status last told ([`Evaluation::take_changes`]).
    told: Status,
}

impl Slot {
    /// A rule not evaluated yet, with its actions.
    pub fn new(rule: Rule, actions: Vec<ActionConfig>) -> Slot {
        let actions = SlotActions::new(actions);
        let needs = match &rule {
            Rule::Tensor(r) => Declared::Tensors(r.needs()),
            Rule::Profiler(r) => Declared::Profiler(r.needs()),
        };
        Slot {
            needs,
            status: RuleStatus {
                rule: rule.name().to_string(),
                kind: rule.input(),
                status: Status::InProgress,
                parameters: Parameters::decode(rule.name(), rule.parameters()),
                actions: actions.kinds(),
                first_fired_step: None,
                last_fired_step: None,
                first_fired_mode: None,
                last_fired_mode: None,
                first_fired_time_us: None,
                last_fired_time_us: None,
                fired_count: 0,
                steps_evaluated: 0,
                datapoints: 0,
                steps_judged: 0,
                steps_in_scope: 0,
                message: String::new(),
                evidence: Vec::new(),
                action_errors: Vec::new(),
                details: RuleDetails::None,
                window: None,
                warnings: Vec::new(),
                unreadable_records: 0,
            },
            rule,
            actions,
            told: Status::InProgress,
        }
    }

    fn input(&self) -> RuleInput {
        self.rule.input()
    }

    /// Whether the rule reads `input` and is still evaluated (it has not failed).
    fn live(&self, input: RuleInput) -> bool {
        self.input() == input && self.status.status != Status::Error
    }
}

/// The rules of one run and where their evaluation stands.
pub(super) struct Evaluation {
    pub slots: Vec<Slot>,
    dispatcher: Dispatcher,
    /// Steps below this were handled.
    next_step: u64,
    /// The trial holds the index of the global steps from this one on
    /// ([`Trial::release_steps_before`]).
    released_before: u64,
    /// The last global step evaluated.
    pub last_step: Option<u64>,
    /// The run is over (or the offline evaluation finished): rules that never fired have
    /// their verdicts.
    pub verdicts_final: bool,
    /// Why the runner stopped following before the run ended; rules that never fired then
    /// keep `InProgress`.
    pub gave_up: Option<String>,
    /// Set: evaluate nothing more ([`RunnerBuilder::interrupt`](super::RunnerBuilder::interrupt)).
    interrupt: Option<Arc<AtomicBool>>,
}

/// Rules taken out of an [`Evaluation`] ([`Evaluation::take_profiler_rules`]), evaluated as one
/// of their own, and where they were.
pub(super) struct TakenRules {
    pub rules: Evaluation,
    /// Their places in the evaluation they came from, ascending.
    places: Vec<usize>,
}

impl Evaluation {
    pub fn new(
        slots: Vec<Slot>,
        dispatcher: Dispatcher,
        interrupt: Option<Arc<AtomicBool>>,
    ) -> Evaluation {
        Evaluation {
            slots,
            dispatcher,
            next_step: 0,
            released_before: 0,
            last_step: None,
            verdicts_final: false,
            gave_up: None,
            interrupt,
        }
    }

    /// Takes the profiler rules out, to be fed on another thread while the debugging rules
    /// left here step over the trial ([`Evaluation::put_back`] returns them); `None` when there
    /// is no profiler rule. The two share the actions' dispatcher and the interrupt flag.
    pub fn take_profiler_rules(&mut self) -> Option<TakenRules> {
        let places: Vec<usize> = (0..self.slots.len())
            .filter(|&i| self.slots[i].input() == RuleInput::Profiler)
            .collect();
        if places.is_empty() {
            return None;
        }
        let mut slots: Vec<Slot> = places.iter().rev().map(|&i| self.slots.remove(i)).collect();
        slots.reverse();
        let rules = Evaluation::new(slots, self.dispatcher.clone(), self.interrupt.clone());
        Some(TakenRules { rules, places })
    }

    /// Returns rules taken by [`Evaluation::take_profiler_rules`] to their places.
    pub fn put_back(&mut self, taken: TakenRules) {
        for (i, slot) in taken.places.into_iter().zip(taken.rules.slots) {
            self.slots.insert(i, slot);
        }
    }

    /// Whether some rule reads tensors.
    pub fn wants_tensors(&self) -> bool {
        self.slots.iter().any(|s| s.input() == RuleInput::Tensors)
    }

    /// Whether the interrupt flag is set.
    pub fn interrupted(&self) -> bool {
        self.interrupt
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Acquire))
    }

    /// Evaluates the steps that every worker has written. With `all`, also steps some worker
    /// skipped (the run is over). Returns (steps processed, whether any status changed).
    pub fn process_available(&mut self, run: &mut RunSource, all: bool) -> Result<(usize, bool)> {
        let Some(trial) = &run.trial else {
            return Ok((0, false));
        };
        if !self.wants_tensors() {
            return Ok((0, false));
        }
        let read_error = |e| run.read_error(e);
        let steps = trial.all_global_steps(None).map_err(read_error)?;
        let mut processed = 0;
        let mut changed = false;
        let from = self.next_step;
        let mut arrived = false;
        for step in steps.into_iter().filter(|s| *s >= from) {
            if self.interrupted() {
                break;
            }
            if !all {
                match trial.has_passed_step(step, None).map_err(read_error)? {
                    StepState::Available => {}
                    StepState::NotYetAvailable => break,
                    StepState::Unavailable => {
                        self.next_step = step + 1;
                        continue;
                    }
                }
            }
            changed |= self.evaluate(trial, step);
            // The rules are past the steps before this one: their files' memory serves the
            // steps to come (the runner's cache is small).
            trial.forget_files_before(step);
            arrived = true;
            self.next_step = step + 1;
            self.last_step = Some(step);
            processed += 1;
            if self.keeps_from(step) >= self.released_before + RELEASE_EVERY {
                self.release(trial, step);
            }
        }
        if let Some(step) = self.last_step {
            self.release(trial, step);
        }
        if arrived {
            run.last_arrival = Instant::now();
        }
        Ok((processed, changed))
    }

    /// The first global step some live debugging rule may still ask about, once the rules
    /// have been handed `judged`: the earliest step of any rule's look-back (the step judged
    /// itself at the latest: `on_idle` hands it to the rules).
    fn keeps_from(&self, judged: u64) -> u64 {
        self.slots
            .iter()
            .filter(|s| s.live(RuleInput::Tensors))
            .filter_map(|s| match &s.needs {
                Declared::Tensors(needs) => Some(needs.look_back.keeps_from(judged)),
                Declared::Profiler(_) => None,
            })
            .min()
            .unwrap_or(judged)
    }

    /// Lets the trial go of the steps behind every live rule's look-back, once the rules have
    /// been handed `judged` (the trial keeps the steps not complete yet).
    fn release(&mut self, trial: &Trial, judged: u64) {
        let keep_from = self.keeps_from(judged);
        if keep_from > self.released_before {
            self.released_before = trial.release_steps_before(keep_from);
        }
    }

    /// Invokes every live debugging rule at `step`; returns whether any status changed.
    fn evaluate(&mut self, trial: &Trial, step: u64) -> bool {
        let mut changed = false;
        for i in 0..self.slots.len() {
            if !self.slots[i].live(RuleInput::Tensors) {
                continue;
            }
            let (outcome, left_out) = match &mut self.slots[i].rule {
                Rule::Tensor(rule) => collecting(|| rule.invoke_at_step(trial, step)),
                Rule::Profiler(_) => continue,
            };
            changed |= self.unreadable(i, left_out.iter().map(ToString::to_string));
            changed |= self.record(i, outcome.map(Some), Handed::Step);
        }
        changed
    }

    /// Tells the live debugging rules that no new step came for `idle`; returns whether any
    /// status changed.
    pub fn idle(&mut self, trial: Option<&Trial>, idle: Duration) -> bool {
        let Some(trial) = trial else {
            return false;
        };
        let mut changed = false;
        for i in 0..self.slots.len() {
            if !self.slots[i].live(RuleInput::Tensors) {
                continue;
            }
            let last = self.last_step;
            let (outcome, left_out) = match &mut self.slots[i].rule {
                Rule::Tensor(rule) => collecting(|| rule.on_idle(trial, last, idle)),
                Rule::Profiler(_) => continue,
            };
            changed |= self.unreadable(i, left_out.iter().map(ToString::to_string));
            changed |= self.record(i, outcome, Handed::Idle);
        }
        changed
    }

    /// Hands `window` to every live profiler rule; returns whether any status changed.
    pub fn invoke_window(&mut self, window: &ProfilerWindow<'_>, steps: &StepTimeline) -> bool {
        let mut changed = false;
        for i in 0..self.slots.len() {
            if !self.slots[i].live(RuleInput::Profiler) {
                continue;
            }
            let outcome = match &mut self.slots[i].rule {
                Rule::Profiler(rule) => rule.invoke_on_window(window),
                Rule::Tensor(_) => continue,
            };
            self.slots[i].status.window = Some(JudgedWindow::of(window));
            changed |= self.record_window(i, outcome, steps);
        }
        changed
    }

    /// The profiler data could not be read: every profiler rule fails with `why`.
    pub fn profiler_failed(&mut self, why: &DataProblem) {
        for s in &mut self.slots {
            let st = &mut s.status;
            if s.rule.input() == RuleInput::Profiler && st.status != Status::Error {
                st.status = Status::Error;
                st.message = format!("reading the run's profiler data failed: {why}");
            }
        }
    }

    /// Gives every profiler rule the data problems it worked around; returns whether any
    /// status changed.
    pub fn set_profiler_warnings(&mut self, warnings: &[String]) -> bool {
        let mut changed = false;
        for s in &mut self.slots {
            if s.rule.input() == RuleInput::Profiler && s.status.warnings != warnings {
                s.status.warnings = warnings.to_vec();
                changed = true;
            }
        }
        changed
    }

    fn record(&mut self, i: usize, outcome: Result<Option<RuleResult>>, handed: Handed) -> bool {
        match outcome {
            Ok(None) => false,
            Ok(Some(r)) => {
                let st = &mut self.slots[i].status;
                if handed == Handed::Step {
                    st.steps_evaluated += 1;
                    if !r.outside {
                        st.steps_in_scope += 1;
                        if r.datapoints + r.unjudged > 0 {
                            st.steps_judged += 1;
                        }
                    }
                }
                st.datapoints += r.datapoints as u64;
                if !r.fired {
                    return false;
                }
                let step = r.step;
                self.fired(i, r, Some(step), None);
                true
            }
            Err(e) => {
                let st = &mut self.slots[i].status;
                if let Some(record) = unreadable_record(&e) {
                    // A rule that read the run by itself and met an unreadable record: that
                    // step goes unjudged (one of the steps it judges, where it had nothing),
                    // the rule goes on.
                    if handed == Handed::Step {
                        st.steps_in_scope += 1;
                    }
                    self.unreadable(i, [record]);
                    return true;
                }
                st.status = Status::Error;
                st.message = e.to_string();
                true
            }
        }
    }

    /// Lists the records rule `i` could not read (the first [`MAX_LISTED_UNREADABLE`]) and
    /// counts them all; returns whether there were any.
    fn unreadable(&mut self, i: usize, records: impl IntoIterator<Item = String>) -> bool {
        let st = &mut self.slots[i].status;
        let before = st.unreadable_records;
        for record in records {
            st.unreadable_records += 1;
            if st.warnings.len() < MAX_LISTED_UNREADABLE {
                st.warnings.push(record);
            }
        }
        st.unreadable_records != before
    }

    /// Records a profiler rule's results over one window.
    fn record_window(
        &mut self,
        i: usize,
        outcome: Result<Vec<RuleResult>>,
        steps: &StepTimeline,
    ) -> bool {
        let results = match outcome {
            Ok(results) => results,
            Err(e) => return self.record(i, Err(e), Handed::Window),
        };
        let mut changed = false;
        self.slots[i].status.steps_evaluated += 1;
        for r in results {
            let st = &mut self.slots[i].status;
            st.datapoints += r.datapoints as u64;
            if !r.fired {
                if !r.message.is_empty() && st.status != Status::IssuesFound {
                    changed |= st.message != r.message;
                    st.message = r.message;
                }
                continue;
            }
            let (step, mode) = match r.time_us.map(|t| steps.mode_step_at(t)) {
                Some(Some((mode, step))) => (Some(step), Some(mode)),
                Some(None) => (None, None),
                None => (Some(r.step), None),
            };
            self.fired(i, r, step, mode);
            changed = true;
        }
        changed
    }

    /// Records a firing (at `step`, of `mode` for a profiler rule's step span) and runs the
    /// rule's actions (once).
    fn fired(&mut self, i: usize, r: RuleResult, step: Option<u64>, mode: Option<Mode>) {
        let slot = &mut self.slots[i];
        let st = &mut slot.status;
        st.status = Status::IssuesFound;
        if let Some(step) = step {
            if st.first_fired_step.is_none() {
                st.first_fired_step = Some(step);
                st.first_fired_mode = mode;
            }
            st.last_fired_step = Some(step);
            st.last_fired_mode = mode;
        }
        if let Some(t) = r.time_us {
            st.first_fired_time_us.get_or_insert(t);
            st.last_fired_time_us = Some(t);
        }
        st.fired_count += 1;
        st.message = r.message.clone();
        st.evidence = r.evidence.clone();
        self.dispatcher
            .fired(&mut slot.actions, &mut slot.status, &r, step);
    }

    /// The rules whose status changed since the last call, each with its change (a status that
    /// went somewhere and back between two calls is no change); the actions triggered by status
    /// changes are carried out here.
    pub fn take_changes(&mut self) -> Vec<(usize, StatusChange)> {
        let mut changes = Vec::new();
        for (i, slot) in self.slots.iter_mut().enumerate() {
            let now = slot.status.status;
            if now == slot.told {
                continue;
            }
            let change = StatusChange {
                from: slot.told,
                to: now,
            };
            slot.told = now;
            self.dispatcher
                .changed(&slot.actions, &mut slot.status, change, self.last_step);
            changes.push((i, change));
        }
        changes
    }

    /// The verdicts of the rules that never fired, once the run is over: `NoIssuesFound` for
    /// those that checked something, `NoData` with the reason for the others. A runner that
    /// gave up on a live run cannot say that a rule found nothing, nor that it had nothing to
    /// check: those stay `InProgress`.
    pub fn settle_verdicts(&mut self, trial: Option<&Trial>, profiler_seen: ProfilerSeen) {
        if self.gave_up.is_some() {
            return;
        }
        self.verdicts_final = true;
        for s in &mut self.slots {
            let st = &mut s.status;
            if st.status != Status::InProgress {
                continue;
            }
            if st.datapoints > 0 {
                st.status = Status::NoIssuesFound;
                continue;
            }
            if st.unreadable_records > 0 {
                // It had something to read and could read none of it: not a pass, and not a
                // run without data either.
                st.status = Status::Error;
                st.message = format!(
                    "checked nothing: every record it reads was unreadable ({} of them, listed \
                     in its warnings), the first: {}",
                    st.unreadable_records,
                    st.warnings.first().map_or("", String::as_str)
                );
                continue;
            }
            st.status = Status::NoData;
            st.message = match &s.needs {
                Declared::Tensors(needs) => tensor_no_data_reason(&st.rule, needs, trial, st),
                Declared::Profiler(needs) => {
                    profiler_no_data_reason(&st.message, profiler_seen, needs, st.warnings.len())
                }
            };
        }
    }

    /// `ProfilerReport`'s slot, when it runs.
    pub fn report_slot(&self) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| is_profiler_report(&s.status.rule))
    }

    /// Sets `ProfilerReport`'s status from its profiler rules' ([`report_verdict`]) and what
    /// became of the report (`outcome`).
    pub fn settle_profiler_report(&mut self, outcome: Option<&ReportOutcome>) {
        let Some(i) = self.report_slot() else {
            return;
        };
        let members: Vec<&RuleStatus> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(j, s)| *j != i && s.input() == RuleInput::Profiler)
            .map(|(_, s)| &s.status)
            .collect();
        let (status, mut message) = report_verdict(&members, self.verdicts_final);
        let fired = members.iter().map(|m| m.fired_count).sum();
        let st = &mut self.slots[i].status;
        st.status = status;
        st.fired_count = fired;
        match outcome {
            Some(ReportOutcome::Written(destination)) => {
                message.push_str(&format!("; report: {destination}"));
            }
            Some(ReportOutcome::Failed(why)) => {
                st.status = Status::Error;
                message.push_str(&format!("; {why}"));
            }
            Some(ReportOutcome::NotDrawn(why)) => message.push_str(&format!("; {why}")),
            None => {}
        }
        st.message = message;
    }

    /// Every rule's status now, with its details.
    pub fn statuses(&self) -> Vec<RuleStatus> {
        self.slots
            .iter()
            .map(|s| {
                let mut status = s.status.clone();
                // How much of the run the rule judged, beside its finding or verdict (an
                // error says it in its own message).
                if let Some(coverage) = status.coverage()
                    && status.status != Status::Error
                {
                    status.message = if status.message.is_empty() {
                        coverage
                    } else {
                        format!("{} ({coverage})", status.message)
                    };
                }
                // A rule without details of its own keeps what the runner put there
                // (where ProfilerReport's report went).
                match &s.rule {
                    Rule::Profiler(rule) => {
                        if let Some(details) = rule.details() {
                            status.message = profiler_message(&status, &details);
                            status.details = RuleDetails::Profiler(details);
                        }
                    }
                    Rule::Tensor(rule) => {
                        let details = rule.details();
                        if !details.is_null() {
                            status.details = RuleDetails::Custom(details);
                        }
                    }
                }
                status
            })
            .collect()
    }
}

/// A built-in profiler rule's message: its finding from `details`, the figures the report and
/// the dashboard show beside it, over the same window. A rule that failed or had nothing to
/// check keeps why; a rule that has not fired and has a word of its own (a core count
/// unknown) keeps it before its finding.
fn profiler_message(status: &RuleStatus, details: &Details) -> String {
    if matches!(status.status, Status::Error | Status::NoData) {
        return status.message.clone();
    }
    let Some(finding) = details.finding(&status.rule) else {
        return status.message.clone();
    };
    if status.status != Status::IssuesFound && !status.message.is_empty() {
        return format!("{}; {finding}", status.message);
    }
    finding
}

/// A rule's failure that is one unreadable record ([`Error::Unreadable`], or a reader's error of
/// that kind that a custom rule passed on as [`Error::Read`]), described for its warnings:
/// the tensor, the step and why. `None` for any other failure.
fn unreadable_record(e: &Error) -> Option<String> {
    match e {
        Error::Unreadable {
            step,
            tensor,
            source,
            ..
        } => Some(format!(
            "`{tensor}` at step {step}: {source} (step {step} not judged)"
        )),
        Error::Read { step, source, .. } if source.is_unreadable_record() => Some(format!(
            "a record at step {step}: {source} (step {step} not judged)"
        )),
        _ => None,
    }
}
