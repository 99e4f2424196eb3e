//! The registry of built-in rules: each rule's name, SageMaker config name, kind, defaults and
//! constructor, and [`build_rule`], which builds a built-in rule, debugging ([`crate::rules`])
//! or profiler ([`crate::profiler`]), from a [`RuleSpec`].

use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::params::{RuleSpec, parse_params, to_json};
use crate::profiler::{
    BatchSize, BatchSizeParams, CPUBottleneck, CPUBottleneckParams, Dataloader, DataloaderParams,
    GPUMemoryIncrease, GPUMemoryIncreaseParams, IOBottleneck, IOBottleneckParams, LoadBalancing,
    LoadBalancingParams, LowGPUUtilization, LowGPUUtilizationParams, MaxInitializationTime,
    MaxInitializationTimeParams, OverallFrameworkMetrics, OverallFrameworkMetricsParams,
    OverallSystemUsage, OverallSystemUsageParams, StepOutlier, StepOutlierParams,
};
use crate::rule::{Rule, RuleInput};
use crate::rules::*;

/// A built-in rule's description for listings (`smdebug rules --list`).
#[derive(Clone, Debug, Serialize)]
pub struct BuiltinRule {
    /// `VanishingGradient`.
    pub name: &'static str,
    /// SageMaker's `rule_configs` name, `vanishing_gradient`.
    pub config_name: &'static str,
    /// What it reads, which is its kind: `debugging` (reads tensors) or `profiler` (reads
    /// system metrics and spans).
    pub kind: RuleInput,
    /// One line: when it fires.
    pub fires_when: &'static str,
    /// One line: what to do when it fires (profiler rules; empty for debugging rules, whose
    /// messages say it).
    #[serde(skip_serializing_if = "str::is_empty")]
    pub recommendation: &'static str,
    /// Parameter names and their defaults.
    pub defaults: Value,
    #[serde(skip)]
    build: BuildFn,
}

/// Builds a rule from its parameter overrides.
type BuildFn = fn(&Map<String, Value>) -> Result<Rule>;

impl BuiltinRule {
    /// Builds the rule with `params` overriding its defaults.
    pub fn build(&self, params: &Map<String, Value>) -> Result<Rule> {
        (self.build)(params)
    }
}

/// A built-in rule's entry: `tensor:` for a [`TensorRule`](crate::TensorRule), `profiler:`
/// for a [`ProfilerRule`](crate::ProfilerRule).
macro_rules! builtin {
    (@ $input:expr, $wrap:ident, $rule:ident, $params:ident, $config:literal, $when:literal, $advice:literal) => {
        BuiltinRule {
            name: $rule::NAME,
            config_name: $config,
            kind: $input,
            fires_when: $when,
            recommendation: $advice,
            defaults: to_json(&$params::default()),
            build: |m| {
                Ok(Rule::$wrap($rule::new(parse_params::<$params>(
                    $rule::NAME,
                    m,
                )?)?))
            },
        }
    };
    (tensor: $($rest:tt)*) => {
        builtin!(@ RuleInput::Tensors, tensor, $($rest)*)
    };
    (profiler: $($rest:tt)*) => {
        builtin!(@ RuleInput::Profiler, profiler, $($rest)*)
    };
}

/// The registry: every built-in rule once, with its parameter type, SageMaker config name,
/// when it fires and what to change. From this one list come [`builtin_rules`],
/// [`builtin_profiler_rules`], the typed parameters of every built-in rule
/// ([`BuiltinParams`], one variant a rule) and each parameter type's rule
/// ([`RuleParams::RULE`]): a rule added here has them all.
macro_rules! registry {
    (
        debugging {
            $( $trule:ident($tparams:ident) { $tconfig:literal, $twhen:literal, $tadvice:literal, } )*
        }
        profiler {
            $( $prule:ident($pparams:ident) { $pconfig:literal, $pwhen:literal, $padvice:literal, } )*
        }
    ) => {
        /// Every built-in debugging rule, in SPEC order.
        pub fn builtin_rules() -> Vec<BuiltinRule> {
            vec![$( builtin!(tensor: $trule, $tparams, $tconfig, $twhen, $tadvice) ),*]
        }

        /// Every built-in profiler rule (all of SageMaker's but ProfilerReport), in SPEC order.
        pub fn builtin_profiler_rules() -> Vec<BuiltinRule> {
            vec![$( builtin!(profiler: $prule, $pparams, $pconfig, $pwhen, $padvice) ),*]
        }

        /// The kind of the built-in rule called `rule` (its name exactly as the registry has
        /// it, as statuses record it); `None` for a rule the registry does not have.
        pub(crate) fn builtin_kind(rule: &str) -> Option<RuleInput> {
            $( if rule == $trule::NAME {
                return Some(RuleInput::Tensors);
            } )*
            $( if rule == $prule::NAME {
                return Some(RuleInput::Profiler);
            } )*
            None
        }

        /// A built-in rule's parameters, typed: one variant a rule of the registry. A
        /// [`RuleStatus`](crate::RuleStatus) holds them in [`Parameters::Builtin`](crate::Parameters::Builtin); read
        /// one rule's with [`RuleStatus::params`](crate::RuleStatus::params).
        #[derive(Clone, Debug, PartialEq)]
        #[allow(missing_docs)]
        pub enum BuiltinParams {
            $( $trule($tparams), )*
            $( $prule($pparams), )*
        }

        impl BuiltinParams {
            /// The parameters recorded for the built-in rule `rule` (its name as the registry
            /// has it): `None` when the registry has no such rule, an error when they do not
            /// read as its parameter type (a value of the wrong kind, or a name it does not have).
            pub fn decode(
                rule: &str,
                recorded: &Value,
            ) -> Option<std::result::Result<BuiltinParams, serde_json::Error>> {
                $( if rule == $trule::NAME {
                    return Some(parameters_as::<$tparams>(recorded).map(BuiltinParams::$trule));
                } )*
                $( if rule == $prule::NAME {
                    return Some(parameters_as::<$pparams>(recorded).map(BuiltinParams::$prule));
                } )*
                None
            }

            /// The rule these are the parameters of.
            pub fn rule(&self) -> &'static str {
                match self {
                    $( BuiltinParams::$trule(_) => $trule::NAME, )*
                    $( BuiltinParams::$prule(_) => $prule::NAME, )*
                }
            }

            /// The JSON form, as statuses and summaries record it (the parameter struct's
            /// fields).
            pub fn to_value(&self) -> Value {
                match self {
                    $( BuiltinParams::$trule(p) => to_json(p), )*
                    $( BuiltinParams::$prule(p) => to_json(p), )*
                }
            }
        }

        $(
            impl RuleParams for $tparams {
                const RULE: &'static str = $trule::NAME;
                fn of(params: &BuiltinParams) -> Option<&Self> {
                    match params {
                        BuiltinParams::$trule(p) => Some(p),
                        _ => None,
                    }
                }
            }
        )*
        $(
            impl RuleParams for $pparams {
                const RULE: &'static str = $prule::NAME;
                fn of(params: &BuiltinParams) -> Option<&Self> {
                    match params {
                        BuiltinParams::$prule(p) => Some(p),
                        _ => None,
                    }
                }
            }
        )*
    };
}

/// A built-in rule's parameter type (`CPUBottleneckParams`, ...), tied to its rule by the
/// registry: [`RuleStatus::params`](crate::RuleStatus::params) reads a status's parameters as
/// one without naming the rule again.
pub trait RuleParams:
    Clone + Default + Serialize + serde::de::DeserializeOwned + Sized + 'static
{
    /// The rule's name (`CPUBottleneck`).
    const RULE: &'static str;
    /// These parameters, when `params` are this rule's.
    fn of(params: &BuiltinParams) -> Option<&Self>;
}

registry! {
    debugging {
        VanishingGradient(VanishingGradientParams) {
            "vanishing_gradient",
            "mean(|gradient|) < threshold",
            "use ReLU-family activations, residual connections or normalization layers, initialize with He/Xavier scaling, or raise the learning rate",
        }
        ExplodingTensor(ExplodingTensorParams) {
            "exploding_tensor",
            "a tensor holds NaN (or ±Inf unless only_nan)",
            "lower the learning rate, clip gradients, check the input data and the loss for divisions by zero or log(0)",
        }
        PoorWeightInitialization(PoorWeightInitializationParams) {
            "poor_weight_initialization",
            "activation-input variance ratio across layers > threshold, gradient p95-p5 < distribution_range, or no early loss decrease",
            "initialize with He (ReLU) or Xavier/Glorot (tanh, sigmoid) scaling for each layer's fan-in",
        }
        SaturatedActivation(SaturatedActivationParams) {
            "saturated_activation",
            "more than threshold_layer % of a tanh/sigmoid layer's units saturated",
            "scale the inputs, lower the initial weights or the learning rate, or switch to ReLU-family activations",
        }
        DeadRelu(DeadReluParams) {
            "dead_relu",
            "more than threshold_layer % of a ReLU layer's units active less than threshold_inactivity %",
            "lower the learning rate, initialize biases at or slightly above zero, or use leaky ReLU",
        }
        WeightUpdateRatio(WeightUpdateRatioParams) {
            "weight_update_ratio",
            "‖Δw‖/‖w‖ outside [small_threshold, large_threshold]",
            "tune the learning rate: updates near 1e-3 of the weights' size are typical; too small stalls, too large diverges",
        }
        AllZero(AllZeroParams) {
            "all_zero",
            "at least threshold % of a tensor's values are zero",
            "check that the tensor is wired into the graph and that its inputs are not all zero (masks, data loading, dead units)",
        }
        ClassImbalance(ClassImbalanceParams) {
            "class_imbalance",
            "class count ratio > threshold_imbalance or a class's misprediction share > threshold_misprediction",
            "resample or weight the classes in the loss, or collect more data for the rare classes",
        }
        LossNotDecreasing(LossNotDecreasingParams) {
            "loss_not_decreasing",
            "the mean of a window of num_steps values fell less than diff_percent % from the window before (with the noise of the two means under increase_threshold_percent %), or rose more than increase_threshold_percent % beyond noise above the lowest window mean, or the loss is NaN",
            "tune the learning rate, check the labels and the loss function, or stop training if the loss has converged",
        }
        Overfit(OverfitParams) {
            "overfit",
            "(validation − training loss)/training loss > ratio_threshold while neither this validation pass nor the one before came improvement_percent % below the lowest pass mean (beyond noise), for patience evaluation steps; a validation block judged once it has as many values as the block before",
            "add regularization (weight decay, dropout, augmentation), use more data, or stop earlier",
        }
        Overtraining(OvertrainingParams) {
            "overtraining",
            "training (moving average of patience_train values) has not improved by delta for patience_train steps, and validation (means of windows of patience_validation EVAL values) not by delta beyond noise for a whole window",
            "stop training at the best validation loss (early stopping)",
        }
        SimilarAcrossRuns(SimilarAcrossRunsParams) {
            "similar_across_runs",
            "tensors differ from another run at the same step",
            "check what changed between the runs: data order, seeds, hyperparameters, code",
        }
        StalledTraining(StalledTrainingParams) {
            "stalled_training_rule",
            "no new step for threshold seconds (live runs)",
            "look for a hang: a stuck data loader, a deadlock between workers, a full disk",
        }
        TensorVariance(TensorVarianceParams) {
            "tensor_variance",
            "a tensor's variance outside [min_threshold, max_threshold]",
            "normalize inputs and activations, and check the initialization and the learning rate",
        }
        UnchangedTensor(UnchangedTensorParams) {
            "unchanged_tensor",
            "a tensor unchanged (allclose) over num_steps saved steps",
            "check that the parameter is trainable, receives gradients and is in the optimizer, and that the learning rate is not zero",
        }
        CheckInputImages(CheckInputImagesParams) {
            "check_input_images",
            "input channel mean further than threshold_mean from 0",
            "normalize the input images (subtract the mean, divide by the standard deviation per channel)",
        }
        NLPSequenceRatio(NLPSequenceRatioParams) {
            "nlp_sequence_ratio",
            "too many padding/unknown tokens",
            "shorten the padding (bucket sequences by length) and enlarge the vocabulary if unknown tokens dominate",
        }
        Confusion(ConfusionParams) {
            "confusion",
            "confusion-matrix diagonal share < min_diag or an off-diagonal share > max_off_diag",
            "look at the classes confused most: more or cleaner data for them, class weights, or a larger model",
        }
        FeatureImportanceOverweight(FeatureImportanceOverweightParams) {
            "feature_importance_overweight",
            "the nfeatures largest importances hold more than threshold (tree models)",
            "check the dominant features for target leakage, and regularize the trees",
        }
        TreeDepth(TreeDepthParams) {
            "tree_depth",
            "tree depth differs from depth (tree models)",
            "tune max_depth: deeper trees overfit, shallower ones underfit",
        }
    }
    profiler {
        BatchSize(BatchSizeParams) {
            "batch_size",
            "p95 of CPU, GPU and GPU memory utilization all below their thresholds: the batch could be larger",
            "raise the batch size (and the learning rate with it), or use a smaller instance",
        }
        CPUBottleneck(CPUBottleneckParams) {
            "cpu_bottleneck",
            "GPU idle (below gpu_threshold) while the CPU is above cpu_threshold in more than threshold % of the samples",
            "move data preprocessing off the critical path (more data-loading workers, preprocessing on the GPU or ahead of time) or use an instance with more CPU",
        }
        IOBottleneck(IOBottleneckParams) {
            "io_bottleneck",
            "GPU idle (below gpu_threshold) while I/O wait is above io_threshold in more than threshold % of the samples",
            "prefetch, cache the data set on local disk, read fewer and larger files, or use faster storage",
        }
        Dataloader(DataloaderParams) {
            "dataloader",
            "data-loading workers fewer than min_threshold % (while loading takes min_loading_percent % or more of the training loop) or more than max_threshold % of the CPU cores",
            "set the number of data-loading workers near the number of CPU cores",
        }
        GPUMemoryIncrease(GPUMemoryIncreaseParams) {
            "gpu_memory_increase",
            "moving average of GPU memory use rises more than increase points above its lowest",
            "look for tensors kept across steps (losses accumulated with their graphs, growing caches) and for growing batch or sequence sizes",
        }
        LoadBalancing(LoadBalancingParams) {
            "load_balancing",
            "Jensen–Shannon distance between two GPUs' utilization histograms above threshold",
            "balance the work across GPUs: even shards and batch sizes, no extra work on one rank",
        }
        LowGPUUtilization(LowGPUUtilizationParams) {
            "low_gpu_utilization",
            "p95 GPU utilization below threshold_p95 (underused), or above it with p5 below threshold_p5 (fluctuating)",
            "underused: give the GPU more work (a larger batch) or use a smaller one; fluctuating: find the stalls between bursts (data loading, synchronization)",
        }
        MaxInitializationTime(MaxInitializationTimeParams) {
            "max_initialization_time",
            "no first step within threshold minutes of the job's start (the process's start, which a session records)",
            "shorten initialization: pre-stage data and models, cache compiled kernels, start the loop earlier",
        }
        OverallSystemUsage(OverallSystemUsageParams) {
            "overall_system_usage",
            "never fires; collects percentiles per node and metric",
            "compare the usage of CPU, GPU, memory, disk and network with what the instance offers",
        }
        OverallFrameworkMetrics(OverallFrameworkMetricsParams) {
            "overall_framework_metrics",
            "never fires; collects time per phase, forward vs backward, CPU vs GPU operators",
            "look at where the time goes: a large share outside steps is initialization or evaluation overhead",
        }
        StepOutlier(StepOutlierParams) {
            "step_outlier",
            "more than n_outliers steps slower than mean + stddev·σ (per node and mode)",
            "find what the slow steps do differently: checkpoints, evaluation, data-loading stalls, garbage collection",
        }
    }
}

/// Every built-in rule: the debugging rules, then the profiler rules.
pub fn all_builtin_rules() -> Vec<BuiltinRule> {
    let mut rules = builtin_rules();
    rules.extend(builtin_profiler_rules());
    rules
}

/// Finds a built-in rule, debugging or profiler, by its name (`VanishingGradient`,
/// case-insensitive) or SageMaker config name (`vanishing_gradient`;
/// `StalledTrainingRule`/`stalled_training_rule` too).
pub fn find_builtin(name: &str) -> Option<BuiltinRule> {
    let wanted = name.trim().to_ascii_lowercase().replace('_', "");
    all_builtin_rules().into_iter().find(|r| {
        let n = r.name.to_ascii_lowercase();
        let c = r.config_name.replace('_', "");
        wanted == n || wanted == c || wanted == format!("{n}rule")
    })
}

/// Builds a built-in rule from a spec (its actions are the runner's business).
///
/// ```
/// use smdebug_rules::{RuleSpec, build_rule};
/// let rule = build_rule(&RuleSpec::parse("VanishingGradient:threshold=1e-6").unwrap()).unwrap();
/// assert_eq!(rule.name(), "VanishingGradient");
/// assert_eq!(rule.parameters()["threshold"], 1e-6);
/// let err = build_rule(&RuleSpec::new("NoSuchRule")).err().unwrap();
/// assert!(err.to_string().contains("VanishingGradient"));
/// ```
pub fn build_rule(spec: &RuleSpec) -> Result<Rule> {
    let builtin = find_builtin(&spec.name).ok_or_else(|| Error::UnknownRule {
        name: spec.name.clone(),
        available: all_builtin_rules()
            .iter()
            .map(|r| r.name.to_string())
            .collect(),
    })?;
    builtin.build(&spec.parameters)
}

/// A rule's parameters as a status or a rule file records them, as the rule's parameter type
/// `P` (`CPUBottleneckParams`, ...): each one not recorded at its default. An error naming what
/// does not fit when they are not `P`'s (another rule's, or recorded by another version): a
/// value of the wrong kind, or a name `P` does not have.
pub(crate) fn parameters_as<P: serde::de::DeserializeOwned + Serialize>(
    parameters: &serde_json::Value,
) -> std::result::Result<P, serde_json::Error> {
    use serde::de::Error as _;
    let empty = serde_json::Value::Object(Default::default());
    let recorded = match parameters {
        serde_json::Value::Null => &empty,
        given => given,
    };
    let params = P::deserialize(recorded)?;
    if let (Some(recorded), Ok(serde_json::Value::Object(known))) =
        (recorded.as_object(), serde_json::to_value(&params))
        && let Some(unknown) = recorded.keys().find(|k| !known.contains_key(*k))
    {
        return Err(serde_json::Error::custom(format!(
            "no parameter `{unknown}` (it has {})",
            known
                .keys()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(params)
}

/// Whether a spec names the `ProfilerReport` rule (`ProfilerReport` or `profiler_report`).
pub fn is_profiler_report(name: &str) -> bool {
    name.trim().to_ascii_lowercase().replace('_', "") == "profilerreport"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_builds_with_defaults_or_names_its_required_parameter() {
        let rules = builtin_rules();
        assert_eq!(rules.len(), 20);
        for r in rules {
            assert_eq!(r.kind, RuleInput::Tensors);
            assert!(!r.recommendation.is_empty(), "{}", r.name);
            match r.build(&Map::new()) {
                Ok(rule) => {
                    assert_eq!(rule.name(), r.name);
                    assert_eq!(rule.parameters(), r.defaults, "{}", r.name);
                }
                // Rules that need a value without a sensible default say which.
                Err(Error::BadParameter { rule, param, .. }) => {
                    assert_eq!(rule, r.name);
                    assert!(
                        ["max_threshold", "other_trials"].contains(&param.as_str()),
                        "{rule}: {param}"
                    );
                }
                Err(e) => panic!("{}: {e}", r.name),
            }
        }
    }

    #[test]
    fn every_profiler_builtin_builds_with_defaults_and_reads_profiler_data() {
        let rules = builtin_profiler_rules();
        assert_eq!(rules.len(), 11);
        for r in rules {
            let rule = r.build(&Map::new()).unwrap();
            assert_eq!(rule.name(), r.name);
            assert_eq!(rule.parameters(), r.defaults, "{}", r.name);
            assert_eq!(rule.input(), RuleInput::Profiler, "{}", r.name);
            assert_eq!(r.kind, RuleInput::Profiler);
            assert!(!r.recommendation.is_empty(), "{}", r.name);
        }
        let cpu = build_rule(&RuleSpec::parse("CPUBottleneck:threshold=30").unwrap()).unwrap();
        assert_eq!(cpu.parameters()["threshold"], 30.0);
        assert_eq!(cpu.parameters()["patience"], 1000);
        assert_eq!(
            find_builtin("low_gpu_utilization").unwrap().name,
            "LowGPUUtilization"
        );
        assert!(builtin_rules().iter().all(|r| r.kind == RuleInput::Tensors));
    }

    #[test]
    fn bad_profiler_parameters_are_rejected() {
        for spec in [
            "CPUBottleneck:threshold=150",
            "LowGPUUtilization:window=0",
            "StepOutlier:mode=TRAINING",
            "MaxInitializationTime:threshold=0",
            "Dataloader:min_threshold=300,max_threshold=200",
            "OverallSystemUsage:threshold=1",
        ] {
            let err = build_rule(&RuleSpec::parse(spec).unwrap()).err();
            assert!(
                matches!(
                    err,
                    Some(Error::BadParameter { .. } | Error::UnknownParameter { .. })
                ),
                "{spec}: {err:?}"
            );
        }
    }

    /// The registry's one list gives every built-in rule its kind and its typed parameters,
    /// whose JSON is the defaults the listing shows.
    #[test]
    fn every_builtin_has_its_kind_and_typed_parameters_from_the_one_list() {
        for b in all_builtin_rules() {
            assert_eq!(builtin_kind(b.name), Some(b.kind), "{}", b.name);
            let params = BuiltinParams::decode(b.name, &b.defaults)
                .expect("a built-in rule")
                .unwrap();
            assert_eq!(params.rule(), b.name);
            assert_eq!(params.to_value(), b.defaults, "{}", b.name);
        }
        assert_eq!(builtin_kind("MyRule"), None);
        assert!(BuiltinParams::decode("MyRule", &Value::Null).is_none());
        assert_eq!(
            <crate::profiler::CPUBottleneckParams as RuleParams>::RULE,
            "CPUBottleneck"
        );
        assert_eq!(
            <VanishingGradientParams as RuleParams>::RULE,
            "VanishingGradient"
        );
    }

    #[test]
    fn rules_are_found_by_class_or_config_name() {
        assert_eq!(
            find_builtin("vanishing_gradient").unwrap().name,
            "VanishingGradient"
        );
        assert_eq!(find_builtin("deadrelu").unwrap().name, "DeadRelu");
        assert_eq!(
            find_builtin("StalledTrainingRule").unwrap().name,
            "StalledTraining"
        );
        assert!(find_builtin("Vanishing").is_none());
    }

    #[test]
    fn bad_regex_is_reported_with_rule_and_pattern() {
        let err = build_rule(&RuleSpec::parse("DeadRelu:tensor_regex=relu[").unwrap())
            .err()
            .unwrap();
        assert!(
            matches!(&err, Error::BadRegex { rule, pattern, .. } if rule == "DeadRelu" && pattern == "relu["),
            "{err}"
        );
    }

    #[test]
    fn out_of_range_parameters_are_rejected() {
        for spec in [
            "AllZero:threshold=150",
            "UnchangedTensor:num_steps=1",
            "NLPSequenceRatio:token_values=0,3",
            "Confusion:min_diag=2",
            "LossNotDecreasing:mode=TRAINING",
            "StalledTraining:threshold=0",
        ] {
            let err = build_rule(&RuleSpec::parse(spec).unwrap()).err();
            assert!(
                matches!(err, Some(Error::BadParameter { .. })),
                "{spec}: {err:?}"
            );
        }
    }

    /// Parameters built in code skip the parsers' finiteness check; every rule's constructor
    /// rejects NaN and the infinities itself, naming the rule and the parameter.
    #[test]
    // Some parameter structs have one field: the macro's struct update then has no effect.
    #[allow(clippy::needless_update)]
    fn non_finite_parameters_built_in_code_are_rejected_naming_rule_and_parameter() {
        use crate::profiler::*;
        macro_rules! case {
            ($rule:ident, $params:ident, $field:ident, $value:expr) => {
                (
                    $rule::new($params {
                        $field: $value,
                        ..Default::default()
                    })
                    .err(),
                    $rule::NAME,
                    stringify!($field),
                )
            };
        }
        for x in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let cases = [
                case!(VanishingGradient, VanishingGradientParams, threshold, x),
                case!(
                    PoorWeightInitialization,
                    PoorWeightInitializationParams,
                    threshold,
                    x
                ),
                case!(
                    SaturatedActivation,
                    SaturatedActivationParams,
                    threshold_tanh_min,
                    x
                ),
                case!(DeadRelu, DeadReluParams, threshold_layer, x),
                case!(WeightUpdateRatio, WeightUpdateRatioParams, epsilon, x),
                case!(AllZero, AllZeroParams, threshold, x),
                case!(ClassImbalance, ClassImbalanceParams, threshold_imbalance, x),
                case!(LossNotDecreasing, LossNotDecreasingParams, diff_percent, x),
                case!(Overfit, OverfitParams, ratio_threshold, x),
                case!(Overtraining, OvertrainingParams, delta, x),
                case!(StalledTraining, StalledTrainingParams, threshold, x),
                case!(TensorVariance, TensorVarianceParams, min_threshold, Some(x)),
                case!(UnchangedTensor, UnchangedTensorParams, atol, x),
                case!(CheckInputImages, CheckInputImagesParams, threshold_mean, x),
                case!(
                    NLPSequenceRatio,
                    NLPSequenceRatioParams,
                    token_thresholds_percent,
                    x.to_string()
                ),
                case!(Confusion, ConfusionParams, max_off_diag, x),
                case!(
                    FeatureImportanceOverweight,
                    FeatureImportanceOverweightParams,
                    threshold,
                    x
                ),
                case!(TreeDepth, TreeDepthParams, depth, x),
                case!(BatchSize, BatchSizeParams, gpu_memory_threshold_p95, x),
                case!(CPUBottleneck, CPUBottleneckParams, cpu_threshold, x),
                case!(IOBottleneck, IOBottleneckParams, io_threshold, x),
                case!(Dataloader, DataloaderParams, min_threshold, x),
                case!(GPUMemoryIncrease, GPUMemoryIncreaseParams, increase, x),
                case!(LoadBalancing, LoadBalancingParams, threshold, x),
                case!(LowGPUUtilization, LowGPUUtilizationParams, threshold_p5, x),
                case!(
                    MaxInitializationTime,
                    MaxInitializationTimeParams,
                    threshold,
                    x
                ),
                case!(StepOutlier, StepOutlierParams, stddev, x),
            ];
            for (err, name, field) in cases {
                assert!(
                    matches!(&err, Some(Error::BadParameter { rule, param, reason })
                        if rule == name && param == field && reason.contains("finite")),
                    "{name}.{field} = {x}: {err:?}"
                );
            }
        }
    }

    #[test]
    fn shared_selection_parameters_stay_flat_in_specs_and_summaries() {
        let rule = build_rule(
            &RuleSpec::parse("AllZero:collection_names=weights,biases,tensor_regex=fc[12]")
                .unwrap(),
        )
        .unwrap();
        let p = rule.parameters();
        assert_eq!(
            p["collection_names"],
            serde_json::json!(["weights", "biases"])
        );
        assert_eq!(p["tensor_regex"], serde_json::json!(["fc[12]"]));
        assert!(p.get("selection").is_none(), "{p}");
        let err = build_rule(&RuleSpec::parse("ExplodingTensor:tensor_regex=relu[").unwrap())
            .err()
            .unwrap();
        assert!(
            matches!(&err, Error::BadRegex { rule, .. } if rule == "ExplodingTensor"),
            "{err}"
        );
        let err = build_rule(&RuleSpec::parse("UnchangedTensor:collection_names=1,2").unwrap());
        assert!(err.is_ok(), "numbers read as collection names, as before");
    }
}
