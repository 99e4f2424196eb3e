//! The built-in debugging rules, with SageMaker Debugger's names, parameters and defaults.
//! The registry (`registry.rs`) builds them, and the profiler rules, from a `RuleSpec`.

mod activations;
mod gradients;
mod inputs;
mod labels;
mod losses;
mod progress;
mod tensors;
mod trees;

pub use activations::{DeadRelu, DeadReluParams, SaturatedActivation, SaturatedActivationParams};
pub use gradients::{
    PoorWeightInitialization, PoorWeightInitializationParams, VanishingGradient,
    VanishingGradientParams, WeightUpdateRatio, WeightUpdateRatioParams,
};
pub use inputs::{
    CheckInputImages, CheckInputImagesParams, NLPSequenceRatio, NLPSequenceRatioParams,
};
pub use labels::{ClassImbalance, ClassImbalanceParams, Confusion, ConfusionParams};
pub use losses::{LossNotDecreasing, LossNotDecreasingParams, Overfit, OverfitParams};
pub use progress::{Overtraining, OvertrainingParams, StalledTraining, StalledTrainingParams};
pub use tensors::{
    AllZero, AllZeroParams, ExplodingTensor, ExplodingTensorParams, SimilarAcrossRuns,
    SimilarAcrossRunsParams, TensorVariance, TensorVarianceParams, UnchangedTensor,
    UnchangedTensorParams,
};
pub use trees::{
    FeatureImportanceOverweight, FeatureImportanceOverweightParams, TreeDepth, TreeDepthParams,
};
