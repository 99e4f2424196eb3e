"""``smdebug.core.collection``: the names of smdebug's built-in collections
(``CollectionKeys``, for ``trial.tensor_names(collection=CollectionKeys.GRADIENTS)``) and the
``Collection`` that ``trial.collection(name)`` returns."""

from ..trials import Collection


class CollectionKeys:
    """The built-in collections' names, as smdebug 1.0.34's hooks write them."""

    DEFAULT = "default"
    ALL = "all"
    INPUTS = "inputs"
    OUTPUTS = "outputs"
    WEIGHTS = "weights"
    GRADIENTS = "gradients"
    LOSSES = "losses"
    BIASES = "biases"
    LAYERS = "layers"
    SM_METRICS = "sm_metrics"
    OPTIMIZER_VARIABLES = "optimizer_variables"
    TENSORFLOW_SUMMARIES = "tensorflow_summaries"
    METRICS = "metrics"
    # XGBoost's.
    HYPERPARAMETERS = "hyperparameters"
    PREDICTIONS = "predictions"
    LABELS = "labels"
    FEATURE_IMPORTANCE = "feature_importance"
    AVERAGE_SHAP = "average_shap"
    FULL_SHAP = "full_shap"
    TREES = "trees"


__all__ = ["Collection", "CollectionKeys"]
