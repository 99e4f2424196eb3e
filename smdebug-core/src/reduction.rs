//! Reductions: small summaries (min, mean, norms, NaN counts, …) saved instead of or beside a tensor.
//!
//! Names follow smdebug so that Python readers find them: a reduction of tensor `fc1.weight` is
//! saved as the scalar tensor `smdebug/reductions/<name>/fc1.weight`, where `<name>` is `mean`,
//! `abs_mean`, `l2`, `abs_l1`, … Config strings use smdebug's spelling (`l2_norm`, `abs_l1_norm`).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::tensor::TensorView;

/// Prefix of every reduction tensor name.
pub const REDUCTIONS_PREFIX: &str = "smdebug/reductions/";

/// What a reduction computes over all elements of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReductionOp {
    /// Smallest element.
    Min,
    /// Largest element.
    Max,
    /// Arithmetic mean.
    Mean,
    /// Population standard deviation (numpy's `std`, ddof = 0).
    Std,
    /// Population variance.
    Variance,
    /// Sum of the elements.
    Sum,
    /// Product of the elements.
    Prod,
    /// Sum of absolute values.
    L1,
    /// Square root of the sum of squares.
    L2,
    /// Number of NaN elements.
    NanCount,
    /// Number of +Inf or -Inf elements.
    InfCount,
    /// Share of elements equal to zero, in [0, 1].
    ZeroFraction,
}

impl ReductionOp {
    /// Every operation.
    pub const ALL: [ReductionOp; 12] = [
        ReductionOp::Min,
        ReductionOp::Max,
        ReductionOp::Mean,
        ReductionOp::Std,
        ReductionOp::Variance,
        ReductionOp::Sum,
        ReductionOp::Prod,
        ReductionOp::L1,
        ReductionOp::L2,
        ReductionOp::NanCount,
        ReductionOp::InfCount,
        ReductionOp::ZeroFraction,
    ];

    /// The name used inside reduction tensor names (`mean`, `l2`, `nan_count`).
    pub const fn name(self) -> &'static str {
        match self {
            ReductionOp::Min => "min",
            ReductionOp::Max => "max",
            ReductionOp::Mean => "mean",
            ReductionOp::Std => "std",
            ReductionOp::Variance => "variance",
            ReductionOp::Sum => "sum",
            ReductionOp::Prod => "prod",
            ReductionOp::L1 => "l1",
            ReductionOp::L2 => "l2",
            ReductionOp::NanCount => "nan_count",
            ReductionOp::InfCount => "inf_count",
            ReductionOp::ZeroFraction => "zero_fraction",
        }
    }

    /// True for the norms, which smdebug's config spells with a `_norm` suffix.
    pub const fn is_norm(self) -> bool {
        matches!(self, ReductionOp::L1 | ReductionOp::L2)
    }

    /// True for the operations Python smdebug knows (min … prod, l1, l2); its reader rejects a
    /// collections file that names any other in `reductions`.
    pub const fn is_smdebug_native(self) -> bool {
        !matches!(
            self,
            ReductionOp::NanCount | ReductionOp::InfCount | ReductionOp::ZeroFraction
        )
    }

    /// The value of this reduction over an empty tensor, as [`Reduction::compute`] gives it:
    /// NaN for min, max, mean, std and variance, 1 for the product, 0 for sums, norms, counts and
    /// the zero fraction. Adapters that reduce on a device use it instead of asking the device.
    pub fn empty_value(self) -> f64 {
        reduce(self, std::iter::empty())
    }

    fn from_name(name: &str) -> Option<ReductionOp> {
        ReductionOp::ALL.into_iter().find(|op| op.name() == name)
    }
}

/// One reduction to save: an operation, applied to the tensor or to its absolute values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reduction {
    /// The operation.
    pub op: ReductionOp,
    /// Apply it to the absolute values (`abs_l2`, …).
    pub abs: bool,
}

impl Reduction {
    /// `op` over the tensor's values.
    pub const fn new(op: ReductionOp) -> Self {
        Reduction { op, abs: false }
    }

    /// `op` over the absolute values.
    pub const fn abs(op: ReductionOp) -> Self {
        Reduction { op, abs: true }
    }

    /// The name inside reduction tensor names: `mean`, `abs_mean`, `l2`, `abs_l1`.
    pub fn tensor_name_part(&self) -> String {
        if self.abs {
            format!("abs_{}", self.op.name())
        } else {
            self.op.name().to_string()
        }
    }

    /// The name of the tensor that holds this reduction of `tensor`
    /// (`smdebug/reductions/abs_mean/fc1.weight`).
    pub fn tensor_name(&self, tensor: &str) -> String {
        format!("{REDUCTIONS_PREFIX}{}/{tensor}", self.tensor_name_part())
    }

    /// Splits a reduction tensor name into the reduction and the reduced tensor's name.
    pub fn parse_tensor_name(name: &str) -> Option<(Reduction, &str)> {
        let rest = name.strip_prefix(REDUCTIONS_PREFIX)?;
        let (part, tensor) = rest.split_once('/')?;
        let (abs, op) = match part.strip_prefix("abs_") {
            Some(op) => (true, op),
            None => (false, part),
        };
        Some((
            Reduction {
                op: ReductionOp::from_name(op)?,
                abs,
            },
            tensor,
        ))
    }

    /// Computes the reduction over every element of `view`, as `f64`.
    ///
    /// Empty tensors give NaN for min/max/mean/std/variance, 0 for sums and counts, 1 for prod.
    pub fn compute(&self, view: &TensorView<'_>) -> f64 {
        let values = view.iter_f64().map(|v| if self.abs { v.abs() } else { v });
        reduce(self.op, values)
    }
}

/// One pass over the values; Welford's update keeps the variance accurate for large tensors.
fn reduce(op: ReductionOp, values: impl ExactSizeIterator<Item = f64>) -> f64 {
    let n = values.len();
    match op {
        // NaN wins, as in numpy; an empty tensor has no extremum.
        ReductionOp::Min if n == 0 => f64::NAN,
        ReductionOp::Max if n == 0 => f64::NAN,
        ReductionOp::Min => values.fold(f64::INFINITY, |m, v| {
            if v.is_nan() || m.is_nan() {
                f64::NAN
            } else {
                m.min(v)
            }
        }),
        ReductionOp::Max => values.fold(f64::NEG_INFINITY, |m, v| {
            if v.is_nan() || m.is_nan() {
                f64::NAN
            } else {
                m.max(v)
            }
        }),
        ReductionOp::Sum => values.sum(),
        ReductionOp::Prod => values.product(),
        ReductionOp::L1 => values.map(f64::abs).sum(),
        ReductionOp::L2 => values.map(|v| v * v).sum::<f64>().sqrt(),
        ReductionOp::NanCount => values.filter(|v| v.is_nan()).count() as f64,
        ReductionOp::InfCount => values.filter(|v| v.is_infinite()).count() as f64,
        ReductionOp::ZeroFraction => {
            if n == 0 {
                0.0
            } else {
                values.filter(|v| *v == 0.0).count() as f64 / n as f64
            }
        }
        ReductionOp::Mean | ReductionOp::Std | ReductionOp::Variance => {
            if n == 0 {
                return f64::NAN;
            }
            let (mut mean, mut m2) = (0.0f64, 0.0f64);
            for (i, v) in values.enumerate() {
                let delta = v - mean;
                mean += delta / (i + 1) as f64;
                m2 += delta * (v - mean);
            }
            match op {
                ReductionOp::Mean => mean,
                ReductionOp::Variance => m2 / n as f64,
                _ => (m2 / n as f64).sqrt(),
            }
        }
    }
}

impl fmt::Display for Reduction {
    /// smdebug's config spelling: `mean`, `abs_mean`, `l2_norm`, `abs_l1_norm`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.abs {
            f.write_str("abs_")?;
        }
        f.write_str(self.op.name())?;
        if self.op.is_norm() {
            f.write_str("_norm")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Reduction {
    type Err = Error;

    /// Parses smdebug's config spelling (`abs_l1_norm`) and the tensor-name spelling (`abs_l1`).
    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim();
        let (abs, rest) = match s.strip_prefix("abs_") {
            Some(r) => (true, r),
            None => (false, s),
        };
        let op_name = rest.strip_suffix("_norm").unwrap_or(rest);
        let op = ReductionOp::from_name(op_name).filter(|op| op.is_norm() || op_name == rest);
        op.map(|op| Reduction { op, abs }).ok_or_else(|| {
            Error::Config(format!(
                "unknown reduction `{s}`: expected one of min, max, mean, std, variance, sum, prod, \
                 l1_norm, l2_norm, nan_count, inf_count, zero_fraction, optionally prefixed with abs_"
            ))
        })
    }
}

/// What to save for the tensors of a collection: the raw tensor, reductions, or both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReductionConfig {
    /// Save the whole tensor. Defaults to true when no reduction is configured.
    pub save_raw_tensor: bool,
    /// The reductions to save.
    pub reductions: Vec<Reduction>,
    /// Save the shape in the index (smdebug's `save_shape`).
    pub save_shape: bool,
}

impl Default for ReductionConfig {
    fn default() -> Self {
        ReductionConfig {
            save_raw_tensor: true,
            reductions: Vec::new(),
            save_shape: false,
        }
    }
}

impl ReductionConfig {
    /// Reductions only, no raw tensor.
    pub fn reductions_only(reductions: impl IntoIterator<Item = Reduction>) -> Self {
        ReductionConfig {
            save_raw_tensor: false,
            reductions: reductions.into_iter().collect(),
            save_shape: false,
        }
    }

    /// Parses a comma-separated list in smdebug's spelling (`"mean,abs_max,l2_norm"`).
    pub fn parse_list(list: &str) -> Result<Vec<Reduction>> {
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::parse)
            .collect()
    }

    /// smdebug's JSON form: `{"save_raw_tensor": .., "reductions": "mean,l2_norm", "save_shape": ..}`.
    /// Reductions Python smdebug does not know (NaN/Inf counts, zero share) go under
    /// `extra_reductions`, which its reader ignores and ours reads back.
    pub fn to_smdebug_json(&self) -> serde_json::Value {
        let list = |native: bool| -> String {
            self.reductions
                .iter()
                .filter(|r| r.op.is_smdebug_native() == native)
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        serde_json::json!({
            "save_raw_tensor": self.save_raw_tensor,
            "reductions": list(true),
            "extra_reductions": list(false),
            "save_shape": self.save_shape,
        })
    }
}

impl Serialize for ReductionConfig {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.to_smdebug_json().serialize(s)
    }
}

impl<'de> Deserialize<'de> for ReductionConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            save_raw_tensor: Option<crate::lenient::Flexible<bool>>,
            #[serde(default)]
            reductions: Option<crate::lenient::StrList>,
            #[serde(default)]
            extra_reductions: Option<crate::lenient::StrList>,
            save_shape: Option<crate::lenient::Flexible<bool>>,
        }
        let raw = Raw::deserialize(d)?;
        let reductions = raw
            .reductions
            .iter()
            .chain(raw.extra_reductions.iter())
            .flat_map(|list| list.0.iter())
            .map(|s| s.parse::<Reduction>())
            .collect::<Result<Vec<_>>>()
            .map_err(serde::de::Error::custom)?;
        Ok(ReductionConfig {
            save_raw_tensor: raw
                .save_raw_tensor
                .map(|f| f.0)
                .unwrap_or(reductions.is_empty()),
            reductions,
            save_shape: raw.save_shape.map(|f| f.0).unwrap_or(false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;

    fn view(values: &[f64]) -> TensorView<'_> {
        TensorView::from_slice(values, &[values.len()]).unwrap()
    }

    #[test]
    fn empty_values_are_what_compute_gives_for_an_empty_tensor() {
        let empty = view(&[]);
        let want = |op| Reduction::new(op).compute(&empty);
        for op in ReductionOp::ALL {
            let got = op.empty_value();
            assert!(
                got == want(op) || (got.is_nan() && want(op).is_nan()),
                "{op:?}"
            );
        }
        assert!(ReductionOp::Min.empty_value().is_nan() && ReductionOp::Std.empty_value().is_nan());
        assert_eq!(ReductionOp::Prod.empty_value(), 1.0);
        assert_eq!(ReductionOp::L2.empty_value(), 0.0);
        assert_eq!(ReductionOp::ZeroFraction.empty_value(), 0.0);
    }

    #[test]
    fn reductions_match_numpy_definitions() {
        let v = [1.0, -2.0, 3.0, 0.0];
        let r = |s: &str| s.parse::<Reduction>().unwrap().compute(&view(&v));
        assert_eq!(r("min"), -2.0);
        assert_eq!(r("max"), 3.0);
        assert_eq!(r("abs_min"), 0.0);
        assert_eq!(r("mean"), 0.5);
        assert!((r("variance") - 3.25).abs() < 1e-12);
        assert!((r("std") - 3.25f64.sqrt()).abs() < 1e-12);
        assert_eq!(r("sum"), 2.0);
        assert_eq!(r("prod"), 0.0);
        assert_eq!(r("l1_norm"), 6.0);
        assert!((r("l2_norm") - 14f64.sqrt()).abs() < 1e-12);
        assert_eq!(r("zero_fraction"), 0.25);
    }

    #[test]
    fn nan_and_inf_are_counted_and_propagate_like_numpy() {
        let v = [1.0, f64::NAN, f64::INFINITY, -f64::INFINITY];
        let r = |s: &str| s.parse::<Reduction>().unwrap().compute(&view(&v));
        assert_eq!(r("nan_count"), 1.0);
        assert_eq!(r("inf_count"), 2.0);
        assert!(r("max").is_nan(), "numpy's max propagates NaN");
        assert!(r("min").is_nan());
        assert!(r("mean").is_nan());
    }

    #[test]
    fn reductions_work_on_low_precision_inputs() {
        let v = [bf16::from_f32(0.5), bf16::from_f32(1.5)];
        let view = TensorView::from_slice(&v, &[2]).unwrap();
        assert_eq!(Reduction::new(ReductionOp::Mean).compute(&view), 1.0);
    }

    #[test]
    fn names_use_smdebug_spelling() {
        let r: Reduction = "abs_l1_norm".parse().unwrap();
        assert_eq!(r, Reduction::abs(ReductionOp::L1));
        assert_eq!(r.to_string(), "abs_l1_norm");
        assert_eq!(r.tensor_name("fc.w"), "smdebug/reductions/abs_l1/fc.w");
        assert_eq!(
            Reduction::parse_tensor_name("smdebug/reductions/abs_l1/fc.w"),
            Some((r, "fc.w"))
        );
        assert!("median".parse::<Reduction>().is_err());
        assert!("mean_norm".parse::<Reduction>().is_err());
    }

    #[test]
    fn reductions_python_smdebug_does_not_know_are_kept_apart() {
        let cfg = ReductionConfig {
            save_raw_tensor: false,
            reductions: ReductionConfig::parse_list("mean,zero_fraction,abs_nan_count,l1_norm")
                .unwrap(),
            save_shape: false,
        };
        let json = cfg.to_smdebug_json();
        assert_eq!(json["reductions"], "mean,l1_norm");
        assert_eq!(json["extra_reductions"], "zero_fraction,abs_nan_count");
        let back: ReductionConfig = serde_json::from_value(json).unwrap();
        let mut want = cfg.reductions.clone();
        want.sort();
        let mut got = back.reductions;
        got.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn config_round_trips_through_smdebug_json() {
        let cfg = ReductionConfig {
            save_raw_tensor: true,
            reductions: ReductionConfig::parse_list("mean, abs_max,l2_norm").unwrap(),
            save_shape: false,
        };
        let json = serde_json::to_string(&cfg).unwrap();
        assert!(
            json.contains("\"reductions\":\"mean,abs_max,l2_norm\""),
            "{json}"
        );
        let back: ReductionConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(back, cfg);
    }
}
