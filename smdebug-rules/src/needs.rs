//! What a rule consumes, as its trait declares it: [`Needs`] for a
//! [`TensorRule`](crate::TensorRule) (the tensors it reads, what the hook must save for it),
//! [`ProfilerNeeds`] for a [`ProfilerRule`](crate::ProfilerRule) (system metrics, framework
//! spans, the step timeline). [`Rule::validate`](crate::Rule::validate) refuses a declaration
//! that says nothing.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use smdebug_core::CaptureRequest;
use smdebug_read::trial::Trial;

use crate::error::Result;
use crate::select::TensorSelection;

/// What a [`TensorRule`](crate::TensorRule) consumes: the tensors it reads and what the hook must save for it.
///
/// - `reads`: the runner uses them to say why a rule that checked nothing had nothing to check
///   (no tensor of the run matched them, naming them), and [`tensor_names`](Self::tensor_names)
///   lists what they select in a run. Empty: the rule reads no tensor (StalledTraining watches
///   steps arrive).
/// - `capture`: the collections (built-in ones by name, or regex collections of the rule's
///   own) and the steps the hook must save them at, applied to a hook's configuration with
///   `smdebug_core::HookConfig::apply` (see [`crate::capture`]).
/// - `requires`: what the rule needs besides matching tensors to have something to check
///   (`each weight at two saved TRAIN steps`), for that same explanation.
#[derive(Clone, Debug, Default)]
pub struct Needs {
    /// The tensors the rule reads (the union of these selections).
    pub reads: Vec<TensorSelection>,
    /// What the hook must save for the rule.
    pub capture: Vec<CaptureRequest>,
    /// What else the rule needs to have something to check, for people; `None` when matching
    /// tensors saved at any step are enough.
    pub requires: Option<String>,
    /// Which earlier steps the rule may still ask the trial about, from the step it judges:
    /// the runner lets go of the steps behind every rule's look-back. Default:
    /// [`LookBack::WholeRun`], the safe choice for a rule that says nothing.
    pub look_back: LookBack,
}

/// How far back from the step it judges a [`TensorRule`](crate::TensorRule) may ask the trial
/// about earlier steps (values, modes, workers at them).
///
/// The runner keeps the index of the last step it handed the rules and of the steps before it
/// that some rule's look-back reaches, and lets the trial go of the steps behind all of them
/// ([`Trial::release_steps_before`]): a rule that declares [`Steps`](LookBack::Steps) costs a
/// bounded amount however long the run. What a rule keeps of earlier steps in its own state
/// (a window of values, a reference tensor) is its own and needs no look-back. A rule that asks
/// about a step behind its declared look-back gets [`smdebug_read::Error::StepReleased`] (its
/// status is then `Error`, naming the step), never "not saved there".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LookBack {
    /// Any step of the run, back to its first (a rule comparing with step 0); the runner then
    /// keeps the whole run's index. The default.
    #[default]
    WholeRun,
    /// Steps at most this many global steps before the step being judged; `Steps(0)`: the
    /// step being judged alone (every built-in rule).
    Steps(u64),
}

impl LookBack {
    /// The first global step a rule that has been handed step `judged` may still ask about.
    pub fn keeps_from(self, judged: u64) -> u64 {
        match self {
            LookBack::WholeRun => 0,
            LookBack::Steps(n) => judged.saturating_sub(n),
        }
    }
}

impl Needs {
    /// Reads `selection` and asks the hook for what it selects at the rules' interval
    /// ([`TensorSelection::capture`]; its regexes in the collection `regex_collection`).
    pub fn of(rule: &str, selection: &TensorSelection, regex_collection: &str) -> Needs {
        Needs {
            reads: vec![selection.clone()],
            capture: selection.capture(rule, regex_collection),
            requires: None,
            look_back: LookBack::WholeRun,
        }
    }

    /// Reads the tensors called `names` and asks the hook to save them, in the collection
    /// `collection` (each name as a pattern of it), at the rules' interval.
    pub fn tensors(rule: &str, names: &[&str], collection: &str) -> Needs {
        Needs::of(rule, &TensorSelection::exact(names), collection)
    }

    /// Also reads `selection` (asking the hook for nothing more).
    pub fn reading(mut self, selection: &TensorSelection) -> Needs {
        self.reads.push(selection.clone());
        self
    }

    /// Also asks the hook for `request`.
    pub fn capturing(mut self, request: CaptureRequest) -> Needs {
        self.capture.push(request);
        self
    }

    /// Says how far back from the step it judges the rule may ask about earlier steps
    /// ([`LookBack`]; without it, the whole run).
    pub fn looking_back(mut self, look_back: LookBack) -> Needs {
        self.look_back = look_back;
        self
    }

    /// Says that the rule asks the trial about the step it judges alone
    /// ([`LookBack::Steps(0)`](LookBack::Steps)): what it needs of earlier steps it keeps.
    pub fn step_by_step(self) -> Needs {
        self.looking_back(LookBack::Steps(0))
    }

    /// Says what else the rule needs to have something to check.
    pub fn requiring(mut self, what: impl Into<String>) -> Needs {
        self.requires = Some(what.into());
        self
    }

    /// The run's tensors the rule reads (every selection's), sorted.
    pub fn tensor_names(&self, rule: &str, trial: &Trial) -> Result<Vec<String>> {
        let mut names = std::collections::BTreeSet::new();
        for selection in &self.reads {
            names.extend(selection.names(rule, trial)?.iter().cloned());
        }
        Ok(names.into_iter().collect())
    }

    /// Why the declaration cannot be registered: it reads no tensor and says nothing else it
    /// needs, or says it requires something without naming it.
    pub(crate) fn problem(&self) -> Option<String> {
        if self.reads.is_empty() && self.requires.is_none() {
            return Some(
                "its needs() declares nothing: it reads no tensor (Needs::of, Needs::tensors, \
                 Needs::reading) and says nothing else it needs (Needs::requiring, for a rule \
                 that watches steps arrive)"
                    .into(),
            );
        }
        blank_requirement(self.requires.as_deref())
    }

    /// What the rule reads, for people: `collection `gradients`, or names matching
    /// `^gradient/``; the selections joined with `; `.
    pub fn describe(&self) -> String {
        self.reads
            .iter()
            .map(TensorSelection::describe)
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// One kind of profiler data a [`ProfilerRule`](crate::ProfilerRule) reads from its [`ProfilerWindow`](crate::ProfilerWindow)s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProfilerInput {
    /// System metrics ([`ProfilerWindow::samples`](crate::ProfilerWindow::samples): CPU, GPU, memory, I/O of each node),
    /// written under `system/`.
    SystemMetrics,
    /// Framework spans ([`ProfilerWindow::spans`](crate::ProfilerWindow::spans): steps, forward, backward, data loading),
    /// written under `framework/pevents/`.
    Spans,
    /// Which step ran when ([`ProfilerWindow::steps`](crate::ProfilerWindow::steps), [`ProfilerWindow::step_at`](crate::ProfilerWindow::step_at)), from the
    /// `Step` spans.
    StepTimeline,
}

impl ProfilerInput {
    /// Every input, in the order above.
    pub const ALL: [ProfilerInput; 3] = [
        ProfilerInput::SystemMetrics,
        ProfilerInput::Spans,
        ProfilerInput::StepTimeline,
    ];

    /// The input for people: `system metrics`, `framework spans`, `the step timeline`.
    pub fn describe(self) -> &'static str {
        match self {
            ProfilerInput::SystemMetrics => "system metrics",
            ProfilerInput::Spans => "framework spans",
            ProfilerInput::StepTimeline => "the step timeline",
        }
    }
}

/// What a [`ProfilerRule`](crate::ProfilerRule) consumes: the kinds of profiler data it reads, and what else it
/// needs to have something to check (`GPU metrics`), for people.
///
/// A declaration that reads nothing is refused when the rule is registered
/// ([`Rule::validate`](crate::Rule::validate)). The runner uses it to say why a rule that checked nothing had nothing
/// to check (the run has no framework spans) when the rule did not say so itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProfilerNeeds {
    /// The kinds of profiler data the rule reads.
    pub reads: BTreeSet<ProfilerInput>,
    /// What else the rule needs to have something to check; `None` when any data of the kinds
    /// it reads is enough.
    pub requires: Option<String>,
}

impl ProfilerNeeds {
    /// Reads `inputs`.
    pub fn reading(inputs: impl IntoIterator<Item = ProfilerInput>) -> ProfilerNeeds {
        ProfilerNeeds {
            reads: inputs.into_iter().collect(),
            requires: None,
        }
    }

    /// Says what else the rule needs to have something to check.
    pub fn requiring(mut self, what: impl Into<String>) -> ProfilerNeeds {
        self.requires = Some(what.into());
        self
    }

    /// Whether the rule reads `input`.
    pub fn reads(&self, input: ProfilerInput) -> bool {
        self.reads.contains(&input)
    }

    /// What the rule reads, for people: `system metrics and the step timeline`.
    pub fn describe(&self) -> String {
        let parts: Vec<&str> = self.reads.iter().map(|i| i.describe()).collect();
        match parts.as_slice() {
            [] => "nothing".into(),
            [one] => (*one).into(),
            [init @ .., last] => format!("{} and {last}", init.join(", ")),
        }
    }

    /// Why the declaration cannot be registered: it reads nothing, or says it requires
    /// something without naming it.
    pub(crate) fn problem(&self) -> Option<String> {
        if self.reads.is_empty() {
            return Some(format!(
                "its needs() declares no profiler data to read: a profiler rule reads one or \
                 more of {} (ProfilerNeeds::reading)",
                ProfilerInput::ALL.map(|i| format!("{i:?}")).join(", ")
            ));
        }
        blank_requirement(self.requires.as_deref())
    }
}

/// A `requires` that is there but says nothing.
fn blank_requirement(requires: Option<&str>) -> Option<String> {
    requires
        .is_some_and(|what| what.trim().is_empty())
        .then(|| {
            "its needs() says it requires something but names nothing (requiring(\"\"))".into()
        })
}
