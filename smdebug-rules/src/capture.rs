//! Rules ask for what they need: each debugging rule declares the collections it reads and the
//! steps it needs them at ([`Needs::capture`](crate::Needs::capture)), the way SageMaker's rules
//! declare their `collections_to_save`. A training job that runs rules applies these requests to
//! its hook before building it, so the hook saves what the rules read whatever else it was told:
//!
//! ```
//! use smdebug_core::{Hook, MemorySink, SaveConfig, SaveConfigMode};
//! use smdebug_rules::{RuleSpec, capture_requests};
//!
//! let specs = [RuleSpec::new("VanishingGradient"), RuleSpec::new("DeadRelu")];
//! let mut builder = Hook::builder()
//!     // The user saves nothing by default...
//!     .save_config(SaveConfig::new(SaveConfigMode::never()));
//! for request in capture_requests(&specs)? {
//!     // ...and each rule's collection is saved at its steps all the same.
//!     builder = builder.capture(request);
//! }
//! let hook = builder.build(MemorySink::default())?;
//! let relu = hook.config().collections.iter().find(|c| c.name() == "relu_output").unwrap();
//! assert!(relu.matches("relu1.output"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Applying a request ([`smdebug_core::HookConfig::apply`]) keeps everything configured: a
//! collection the user saves on a schedule of their own is saved at the union of that schedule
//! and the rule's. Profiler rules ask for nothing (their data comes from the sampler and the
//! spans, not the hook). The requests of custom rules come from their own
//! [`needs`](crate::TensorRule::needs) ([`Rule::capture_requests`]); a runner's builder gives
//! all of its rules' at once ([`RunnerBuilder::capture_requests`](crate::runner::RunnerBuilder::capture_requests)).
//!
//! What each built-in debugging rule asks for, at every [`RULE_SAVE_INTERVAL`]th step of every
//! mode unless said otherwise:
//!
//! | rule | collections |
//! | --- | --- |
//! | VanishingGradient | `gradients` |
//! | ExplodingTensor, TensorVariance, SimilarAcrossRuns | `collection_names`, and `tensor_regex` as a collection named after the rule; with neither, `weights`, `biases`, `gradients`, `losses` |
//! | AllZero | the same; with neither, `weights`, `gradients`, `outputs` |
//! | UnchangedTensor | the same; with neither, `weights`, `biases` |
//! | PoorWeightInitialization | `relu_input` (its `activation_inputs_regex`), `gradients` and `losses`, at each of the first `steps` steps |
//! | SaturatedActivation | `tanh_sigmoid_activations` (its `tensor_regex`) |
//! | DeadRelu | `relu_output` (its `tensor_regex`) |
//! | WeightUpdateRatio | `weights` |
//! | ClassImbalance | `labels`, `predictions` (its `labels_regex`, `predictions_regex`) |
//! | LossNotDecreasing | `losses` (unless `use_losses_collection` is off and a selection is given), `collection_names`, `tensor_regex` as `LossNotDecreasing`, every 500/(2·`num_steps`)th step (every 25th by default: it compares windows of `num_steps` values, and at the rules' interval its first verdict would come after 10,000 steps) |
//! | Overfit | `losses`, `tensor_regex` as `Overfit` |
//! | Overtraining | `losses` |
//! | StalledTraining | `losses` (it watches saved steps arrive) |
//! | CheckInputImages | `input_image` (its `regex`) |
//! | NLPSequenceRatio | `input_sequence` (its `tensor_regex`) |
//! | Confusion | `labels`, `predictions` (the collections and tensors it names) |
//! | FeatureImportanceOverweight | `feature_importance` (its `tensor_regex`) |
//! | TreeDepth | `trees` |

use smdebug_core::CaptureRequest;

use crate::error::Result;
use crate::params::RuleSpec;
use crate::registry::build_rule;
use crate::report::{expand_profiler_report, is_profiler_report};
use crate::rule::Rule;

pub use crate::select::{RULE_SAVE_INTERVAL, request};

/// What the hook must save for the built-in rules of `specs` (`ProfilerReport` and the profiler
/// rules ask for nothing), in spec order. Builds each rule: an unknown rule or a bad parameter
/// is an error here, as it would be when the runner is built.
pub fn capture_requests(specs: &[RuleSpec]) -> Result<Vec<CaptureRequest>> {
    let mut out = Vec::new();
    for spec in specs {
        if is_profiler_report(&spec.name) {
            // Checks its overrides; its rules are profiler rules.
            expand_profiler_report(spec)?;
            continue;
        }
        let rule = build_rule(spec)?;
        rule.validate()?;
        out.extend(rule.capture_requests());
    }
    Ok(out)
}

/// What the hook must save for `rules` (custom rules, or built-in ones already built).
pub fn rules_capture_requests<'a>(
    rules: impl IntoIterator<Item = &'a Rule>,
) -> Vec<CaptureRequest> {
    rules.into_iter().flat_map(Rule::capture_requests).collect()
}
