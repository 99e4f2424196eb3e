//! The built-in debugging rules, with SageMaker Debugger's names, parameters and defaults.
//! The registry (`registry.rs`) builds them, and the profiler rules, from a `RuleSpec`.

mod activations;
mod data;
mod gradients;
mod losses;
mod tensors;
mod trees;

pub use activations::{DeadRelu, DeadReluParams, SaturatedActivation, SaturatedActivationParams};
pub use data::{
    CheckInputImages, CheckInputImagesParams, ClassImbalance, ClassImbalanceParams, Confusion,
    ConfusionParams, NLPSequenceRatio, NLPSequenceRatioParams,
};
pub use gradients::{
    PoorWeightInitialization, PoorWeightInitializationParams, VanishingGradient,
    VanishingGradientParams, WeightUpdateRatio, WeightUpdateRatioParams,
};
pub use losses::{
    LossNotDecreasing, LossNotDecreasingParams, Overfit, OverfitParams, Overtraining,
    OvertrainingParams, StalledTraining, StalledTrainingParams,
};
pub use tensors::{
    AllZero, AllZeroParams, ExplodingTensor, ExplodingTensorParams, SimilarAcrossRuns,
    SimilarAcrossRunsParams, TensorVariance, TensorVarianceParams, UnchangedTensor,
    UnchangedTensorParams,
};
pub use trees::{
    FeatureImportanceOverweight, FeatureImportanceOverweightParams, TreeDepth, TreeDepthParams,
};
