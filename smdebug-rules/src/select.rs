//! Choosing tensors, asking the hook to save them, and reading them at a step: the pieces every
//! rule shares.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use ndarray::ArrayD;
use smdebug_core::{CaptureRequest, Mode, PyRegex, Reduction, ReductionOp, SaveConfig};
use smdebug_read::trial::{NamesKey, TensorValue, Trial};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result, is_absent};
use crate::params::lenient;
use crate::unreadable::left_out;

/// Every how many steps (of each mode) a rule asks for its collections: SageMaker's
/// `collections_to_save` interval for every built-in rule, and the hook's own default.
pub const RULE_SAVE_INTERVAL: u64 = 500;

/// A request by `rule` for `collection` at every [`RULE_SAVE_INTERVAL`]th step of every mode.
pub fn request(collection: &str, rule: &str) -> CaptureRequest {
    CaptureRequest::new(
        collection,
        SaveConfig::every(RULE_SAVE_INTERVAL),
        rule.to_string(),
    )
}

/// The collections a rule that reads every tensor asks the hook for: what every adapter and
/// hand-written loop records (parameters, gradients, losses).
pub const EVERY_TENSOR_COLLECTIONS: [&str; 4] = ["weights", "biases", "gradients", "losses"];

/// The tensors a rule checks, as users name them: the `collection_names` and `tensor_regex`
/// parameters many rules share (flattened into their parameter structs). Flattened, the
/// fields take these defaults (none), not the parameter struct's: a rule with a default regex
/// keeps its own fields.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SelectionParams {
    /// Collections to check. Default: none.
    #[serde(deserialize_with = "lenient::list")]
    pub collection_names: Vec<String>,
    /// Regexes of tensor names to check (Python `re` syntax). Default: none.
    #[serde(deserialize_with = "lenient::regexes")]
    pub tensor_regex: Vec<String>,
}

impl SelectionParams {
    /// The selection, compiled; with neither collections nor regexes given, the
    /// `default_collections` (every tensor when there are none).
    pub fn selection(&self, rule: &str, default_collections: &[&str]) -> Result<TensorSelection> {
        let collections = if self.collection_names.is_empty() && self.tensor_regex.is_empty() {
            default_collections.iter().map(|c| c.to_string()).collect()
        } else {
            self.collection_names.clone()
        };
        TensorSelection::new(rule, &collections, &self.tensor_regex)
    }
}

/// Which tensors a rule looks at: the union of some collections, of the tensor names that
/// match some regexes (Python `re` syntax, searched anywhere in the name like
/// `Trial::tensor_names_filtered` and Python smdebug's rules), and of tensors named exactly.
/// A collection the run does not have (yet) selects nothing.
#[derive(Clone, Debug, Default)]
pub struct TensorSelection {
    collections: Vec<String>,
    regexes: Vec<PyRegex>,
    /// Tensors selected by their exact name.
    exact: Vec<String>,
    /// With neither collections nor regexes: `true` selects every tensor, `false` none.
    empty_selects_all: bool,
    /// The names last selected, and where the trial's names stood then.
    memo: NamesMemo,
}

/// A selection's names as last worked out, kept while the trial's names and collections stay
/// where they were ([`Trial::names_key`]): a rule asks at every step, and matching every name
/// against the patterns again each time was most of a long run's rule evaluation.
#[derive(Default)]
struct NamesMemo(Mutex<Option<(NamesKey, Arc<[String]>)>>);

impl NamesMemo {
    fn get(&self, key: NamesKey) -> Option<Arc<[String]>> {
        let memo = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        memo.as_ref()
            .filter(|(k, _)| *k == key)
            .map(|(_, names)| Arc::clone(names))
    }

    fn set(&self, key: NamesKey, names: Arc<[String]>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some((key, names));
    }
}

/// A copy starts with nothing kept (it may be used with another trial).
impl Clone for NamesMemo {
    fn clone(&self) -> Self {
        NamesMemo::default()
    }
}

impl std::fmt::Debug for NamesMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NamesMemo")
    }
}

/// A loss by its name, for runs without a `losses` collection: a name containing `loss`
/// (`loss`, `CrossEntropyLoss_output_0`) that is not one of the loss's inputs, as our adapters
/// (`loss.predictions`, `loss.labels`) and Python smdebug's `register_loss`
/// (`CrossEntropyLoss_input_0`) name them.
pub const LOSS_BY_NAME: &str = r"(?i)loss(?!.*(\.labels|\.predictions|_input_\d+)$)";

impl TensorSelection {
    /// Compiles the regexes; a bad one is reported with the rule's name. With neither
    /// collections nor regexes, the selection is every tensor.
    pub fn new(rule: &str, collections: &[String], patterns: &[String]) -> Result<Self> {
        Ok(TensorSelection {
            collections: collections.to_vec(),
            regexes: compile_all(rule, patterns)?,
            exact: Vec::new(),
            empty_selects_all: true,
            memo: NamesMemo::default(),
        })
    }

    /// Like [`new`](Self::new), but with neither collections nor regexes nothing is selected
    /// (a rule about one kind of tensor, found by its default regex, that the user emptied).
    pub fn only(rule: &str, collections: &[String], patterns: &[String]) -> Result<Self> {
        Ok(TensorSelection {
            empty_selects_all: false,
            ..TensorSelection::new(rule, collections, patterns)?
        })
    }

    /// The gradients: the `gradients` collection and names starting with `gradient/`.
    pub fn gradients(rule: &str) -> Result<Self> {
        TensorSelection::new(rule, &["gradients".into()], &["^gradient/".into()])
    }

    /// Losses: given collections and regexes, plus the `losses` collection when asked; with
    /// nothing given, names containing `loss` as well (runs without a `losses` collection) that
    /// are not what a loss was computed from ([`LOSS_BY_NAME`]).
    pub fn losses(
        rule: &str,
        collections: &[String],
        regexes: &[String],
        use_losses_collection: bool,
    ) -> Result<Self> {
        let mut c = collections.to_vec();
        let mut r = regexes.to_vec();
        if use_losses_collection {
            c.push("losses".into());
        }
        if collections.is_empty() && regexes.is_empty() {
            r.push(LOSS_BY_NAME.into());
        }
        TensorSelection::new(rule, &c, &r)
    }

    /// Exactly the tensors called `names` (nothing when `names` is empty).
    pub fn exact(names: &[&str]) -> Self {
        TensorSelection {
            empty_selects_all: false,
            ..TensorSelection::default()
        }
        .with_names(names)
    }

    /// Also the tensors called `names`.
    pub fn with_names(mut self, names: &[&str]) -> Self {
        self.exact.extend(names.iter().map(|n| n.to_string()));
        self
    }

    /// The collections selected.
    pub fn collections(&self) -> &[String] {
        &self.collections
    }

    /// The regexes selecting by name, as given (Python `re` syntax).
    pub fn patterns(&self) -> impl Iterator<Item = &str> {
        self.regexes.iter().map(PyRegex::as_str)
    }

    /// Whether the selection is every tensor of the run (neither collections nor regexes, and
    /// made by [`new`](Self::new)).
    pub fn selects_everything(&self) -> bool {
        self.is_empty() && self.empty_selects_all
    }

    /// The selection for people: `collection `gradients`, or names matching `^gradient/``.
    pub fn describe(&self) -> String {
        if self.selects_everything() {
            return "every tensor".into();
        }
        if self.is_empty() {
            return "no tensor (an empty selection)".into();
        }
        let quote = |items: Vec<&str>| {
            items
                .iter()
                .map(|i| format!("`{i}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut parts = Vec::new();
        if !self.exact.is_empty() {
            let word = if self.exact.len() == 1 {
                "tensor"
            } else {
                "tensors"
            };
            parts.push(format!(
                "{word} {}",
                quote(self.exact.iter().map(String::as_str).collect())
            ));
        }
        if !self.collections.is_empty() {
            let word = if self.collections.len() == 1 {
                "collection"
            } else {
                "collections"
            };
            parts.push(format!(
                "{word} {}",
                quote(self.collections.iter().map(String::as_str).collect())
            ));
        }
        if !self.regexes.is_empty() {
            parts.push(format!(
                "names matching {}",
                quote(self.patterns().collect())
            ));
        }
        parts.join(", or ")
    }

    /// What the hook must save for a rule reading this selection, at the rules' interval
    /// ([`RULE_SAVE_INTERVAL`]): each collection by name, and the regexes as
    /// the collection `regex_collection`. A selection of every tensor asks for
    /// [`EVERY_TENSOR_COLLECTIONS`]; an emptied one for nothing.
    pub fn capture(&self, rule: &str, regex_collection: &str) -> Vec<CaptureRequest> {
        if self.selects_everything() {
            return EVERY_TENSOR_COLLECTIONS
                .iter()
                .map(|c| request(c, rule))
                .collect();
        }
        let mut out: Vec<CaptureRequest> = self
            .collections
            .iter()
            .filter(|c| !c.trim().is_empty())
            .map(|c| request(c, rule))
            .collect();
        if !self.regexes.is_empty() || !self.exact.is_empty() {
            let mut r = request(regex_collection, rule);
            r.include_regex = self
                .patterns()
                .map(str::to_string)
                .chain(self.exact.iter().map(|n| exact_name_pattern(n)))
                .collect();
            out.push(r);
        }
        out
    }

    /// True when neither a collection, a regex nor a name was given.
    pub fn is_empty(&self) -> bool {
        self.collections.is_empty() && self.regexes.is_empty() && self.exact.is_empty()
    }

    /// Whether `name` matches one of the regexes (collections are not consulted).
    pub fn matches_regex(&self, name: &str) -> bool {
        self.regexes.iter().any(|r| r.is_match(name))
    }

    /// The selected tensor names, sorted. Worked out again only when the trial's names or
    /// collections moved since the last call ([`Trial::names_key`]).
    pub fn names(&self, rule: &str, trial: &Trial) -> Result<Arc<[String]>> {
        if self.is_empty() && !self.empty_selects_all {
            return Ok(Arc::from([]));
        }
        let read = |e| read_error(rule, 0, e);
        let key = trial.names_key().map_err(read)?;
        if let Some(names) = self.memo.get(key) {
            return Ok(names);
        }
        let names: Arc<[String]> = self.select(rule, trial)?.into();
        self.memo.set(key, Arc::clone(&names));
        Ok(names)
    }

    /// The selected names, matched now.
    fn select(&self, rule: &str, trial: &Trial) -> Result<Vec<String>> {
        let read = |e| read_error(rule, 0, e);
        let all = trial.tensor_names().map_err(read)?;
        if self.is_empty() {
            return Ok(all);
        }
        let mut out: BTreeSet<String> = all
            .into_iter()
            .filter(|n| self.matches_regex(n) || self.exact.contains(n))
            .collect();
        for c in &self.collections {
            match trial.tensor_names_filtered(Some(c), None) {
                Ok(names) => out.extend(names),
                Err(e) if is_absent(&e) => {}
                Err(e) => return Err(read(e)),
            }
        }
        Ok(out.into_iter().collect())
    }

    /// Each selected tensor saved at global step `step`, with its value, in name order.
    /// Tensors not saved there are skipped; a failed read ends the loop with its error.
    ///
    /// ```no_run
    /// # use smdebug_rules::{Result, TensorSelection};
    /// # fn check(selection: &TensorSelection, trial: &smdebug_read::trial::Trial) -> Result<()> {
    /// for reading in selection.values_at("MyRule", trial, 10)? {
    ///     let (name, value) = reading?;
    ///     println!("{name}: {} values", value.len());
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn values_at<'a>(
        &self,
        rule: &'a str,
        trial: &'a Trial,
        step: u64,
    ) -> Result<impl Iterator<Item = Result<(String, ArrayD<f64>)>> + use<'a>> {
        self.read_step(rule, trial, step, Some)
    }

    /// Like [`values_at`](Self::values_at), leaving out tensors with no elements (for rules
    /// that look at the samples inside a batch).
    pub fn nonempty_at<'a>(
        &self,
        rule: &'a str,
        trial: &'a Trial,
        step: u64,
    ) -> Result<impl Iterator<Item = Result<(String, ArrayD<f64>)>> + use<'a>> {
        Ok(self
            .values_at(rule, trial, step)?
            .filter(|reading| reading.as_ref().map_or(true, |(_, v)| !v.is_empty())))
    }

    /// Like [`values_at`](Self::values_at), with each tensor's first value (for scalars).
    pub fn scalars_at<'a>(
        &self,
        rule: &'a str,
        trial: &'a Trial,
        step: u64,
    ) -> Result<impl Iterator<Item = Result<(String, f64)>> + use<'a>> {
        self.read_step(rule, trial, step, |v| v.iter().next().copied())
    }

    /// Like [`values_at`](Self::values_at), with a reduction of each tensor (see
    /// [`reduction_at`]).
    pub fn reductions_at<'a>(
        &self,
        rule: &'a str,
        trial: &'a Trial,
        step: u64,
        reduction: Reduction,
    ) -> Result<impl Iterator<Item = Result<(String, f64)>> + use<'a>> {
        self.read_each(rule, trial, move |name| {
            reduction_at(rule, trial, name, step, reduction)
        })
    }

    /// The selected names, each with what `take` makes of its value at global step `step`
    /// (skipping tensors not saved there and `None`s): the values read in one go
    /// ([`values_of_step`]), each as [`value_at`] gives it. The iterator borrows neither the
    /// selection nor the rule, so the rule may update its state meanwhile.
    fn read_step<'a, T, F>(
        &self,
        rule: &'a str,
        trial: &Trial,
        step: u64,
        take: F,
    ) -> Result<impl Iterator<Item = Result<(String, T)>> + use<'a, T, F>>
    where
        F: Fn(ArrayD<f64>) -> Option<T>,
    {
        let names = self.names(rule, trial)?;
        let values = values_of_step(rule, trial, &names, step, None);
        Ok(values.enumerate().filter_map(move |(i, value)| {
            value
                .map(|v| v.and_then(&take))
                .transpose()
                .map(|r| r.map(|v| (names[i].clone(), v)))
        }))
    }

    /// The selected names, each with what `read` finds for it (skipping `None`). The iterator
    /// borrows neither the selection nor the rule, so the rule may update its state meanwhile.
    fn read_each<T, F>(
        &self,
        rule: &str,
        trial: &Trial,
        mut read: F,
    ) -> Result<impl Iterator<Item = Result<(String, T)>> + use<T, F>>
    where
        F: FnMut(&str) -> Result<Option<T>>,
    {
        let names = self.names(rule, trial)?;
        Ok((0..names.len()).filter_map(move |i| {
            let name = &names[i];
            read(name).transpose().map(|r| r.map(|v| (name.clone(), v)))
        }))
    }
}

/// The regex (Python `re` syntax) that matches the tensor name `name` and nothing else:
/// `^name$` with the characters special to Python's and Rust's regex syntax escaped.
pub fn exact_name_pattern(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    out.push('^');
    for c in name.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('$');
    out
}

/// Compiles regexes (Python `re` syntax), naming the rule and the pattern on failure.
pub fn compile_all(rule: &str, patterns: &[String]) -> Result<Vec<PyRegex>> {
    patterns
        .iter()
        .map(|p| {
            PyRegex::new(p).map_err(|e| Error::BadRegex {
                rule: rule.to_string(),
                pattern: p.clone(),
                reason: e.to_string(),
            })
        })
        .collect()
}

/// The value of `name` at global step `step`, or `None` when it was not saved there.
pub fn value_at(rule: &str, trial: &Trial, name: &str, step: u64) -> Result<Option<ArrayD<f64>>> {
    mode_value_at(rule, trial, name, step, None)
}

/// The value of `name` at `step` counted in `mode` (global step for `None`), or `None` when it
/// was not saved there.
pub fn mode_value_at(
    rule: &str,
    trial: &Trial,
    name: &str,
    step: u64,
    mode: Option<Mode>,
) -> Result<Option<ArrayD<f64>>> {
    let t = match trial.tensor(name) {
        Ok(t) => t,
        Err(e) if is_absent(&e) => return Ok(None),
        Err(e) => return Err(read_error(rule, step, e)),
    };
    match t.value(step, mode, None) {
        Ok(v) => Ok(Some(v)),
        Err(e) if is_absent(&e) => Ok(None),
        Err(e) => left_out(rule, name, step, mode, e),
    }
}

/// Tensors `names`' values at step `step` counted in `mode` (global step for `None`), in the
/// order of `names`: for each, what [`mode_value_at`] gives (the value, `None` when it was not
/// saved there, a record that cannot be read left out as it leaves it, or the error that ends
/// the rule), the records read in one go ([`Trial::values_at_step`]: one lookup, a scalar's
/// record read in one pass). What each answer means for the rule (a record left out, an
/// error) is settled as the iterator reaches it, in the order reading name by name settles it.
pub fn values_of_step<'a>(
    rule: &'a str,
    trial: &Trial,
    names: &Arc<[String]>,
    step: u64,
    mode: Option<Mode>,
) -> impl Iterator<Item = Result<Option<ArrayD<f64>>>> + use<'a> {
    let names = Arc::clone(names);
    // The handles first, as `mode_value_at` takes them: a name the trial does not know gets
    // no value read.
    let handles: Vec<Option<smdebug_read::Error>> =
        names.iter().map(|name| trial.tensor(name).err()).collect();
    let known: Vec<&str> = names
        .iter()
        .zip(&handles)
        .filter(|(_, handle)| handle.is_none())
        .map(|(name, _)| name.as_str())
        .collect();
    let mut values = trial.values_at_step(&known, step, mode, None).into_iter();
    handles
        .into_iter()
        .enumerate()
        .map(move |(i, handle)| match handle {
            Some(e) if is_absent(&e) => Ok(None),
            Some(e) => Err(read_error(rule, step, e)),
            None => match values.next().expect("one value for each known name") {
                Ok(v) => Ok(Some(v)),
                Err(e) if is_absent(&e) => Ok(None),
                Err(e) => left_out(rule, &names[i], step, mode, e),
            },
        })
}

/// A string tensor's elements at global step `step` (UTF-8, anything else replaced by U+FFFD),
/// or `None` when `name` is not saved there or holds numbers.
pub fn strings_at(rule: &str, trial: &Trial, name: &str, step: u64) -> Result<Option<Vec<String>>> {
    let t = match trial.tensor(name) {
        Ok(t) => t,
        Err(e) if is_absent(&e) => return Ok(None),
        Err(e) => return Err(read_error(rule, step, e)),
    };
    match t.read(step, None, None) {
        Ok(TensorValue::Strings(s)) => Ok(Some(
            s.values()
                .iter()
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .collect(),
        )),
        Ok(TensorValue::Numbers(_)) => Ok(None),
        Err(e) if is_absent(&e) => Ok(None),
        Err(e) => left_out(rule, name, step, None, e),
    }
}

/// A scalar tensor's value at a step (the first element), or `None` when not saved there.
pub fn scalar_at(
    rule: &str,
    trial: &Trial,
    name: &str,
    step: u64,
    mode: Option<Mode>,
) -> Result<Option<f64>> {
    Ok(mode_value_at(rule, trial, name, step, mode)?.and_then(|v| v.iter().next().copied()))
}

/// A reduction of `name` at global step `step`: the saved reduction when the run has it
/// (a hook configured to save reductions only), else computed from the raw tensor.
pub fn reduction_at(
    rule: &str,
    trial: &Trial,
    name: &str,
    step: u64,
    reduction: Reduction,
) -> Result<Option<f64>> {
    let t = match trial.tensor(name) {
        Ok(t) => t,
        Err(e) if is_absent(&e) => return Ok(None),
        Err(e) => return Err(read_error(rule, step, e)),
    };
    match t.reduction_value(step, reduction, None, None) {
        Ok(v) => return Ok(Some(v)),
        Err(e) if is_absent(&e) => {}
        Err(e) => return left_out(rule, name, step, None, e),
    }
    Ok(value_at(rule, trial, name, step)?.map(|v| reduce(&v, reduction)))
}

/// Computes a reduction over an array the way smdebug-core's hook does.
pub fn reduce(v: &ArrayD<f64>, reduction: Reduction) -> f64 {
    let vals: Vec<f64> = if reduction.abs {
        v.iter().map(|x| x.abs()).collect()
    } else {
        v.iter().copied().collect()
    };
    let n = vals.len() as f64;
    let mean = || vals.iter().sum::<f64>() / n;
    let variance = || {
        let m = mean();
        vals.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n
    };
    match reduction.op {
        ReductionOp::Min => vals.iter().copied().fold(f64::INFINITY, f64::min),
        ReductionOp::Max => vals.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        ReductionOp::Mean => mean(),
        ReductionOp::Std => variance().sqrt(),
        ReductionOp::Variance => variance(),
        ReductionOp::Sum => vals.iter().sum(),
        ReductionOp::Prod => vals.iter().product(),
        ReductionOp::L1 => vals.iter().map(|x| x.abs()).sum(),
        ReductionOp::L2 => vals.iter().map(|x| x * x).sum::<f64>().sqrt(),
        ReductionOp::NanCount => vals.iter().filter(|x| x.is_nan()).count() as f64,
        ReductionOp::InfCount => vals.iter().filter(|x| x.is_infinite()).count() as f64,
        ReductionOp::ZeroFraction => vals.iter().filter(|x| **x == 0.0).count() as f64 / n,
        // ReductionOp is non-exhaustive in spirit: an operation added later has no meaning here.
        #[allow(unreachable_patterns)]
        _ => f64::NAN,
    }
}

pub(crate) fn read_error(rule: &str, step: u64, e: smdebug_read::Error) -> Error {
    Error::Read {
        rule: rule.to_string(),
        step,
        source: Box::new(e),
    }
}

/// The mode of global step `step` (`Global` when the hook set none), or `None` when the run
/// has no such step.
pub fn mode_at(rule: &str, trial: &Trial, step: u64) -> Result<Option<Mode>> {
    let found = trial
        .step_mode(step)
        .map_err(|e| read_error(rule, step, e))?;
    Ok(found.map(|(mode, _)| mode))
}

/// numpy's `allclose(a, b, rtol, atol, equal_nan)` for arrays of the same shape.
pub(crate) fn allclose(
    a: &ArrayD<f64>,
    b: &ArrayD<f64>,
    rtol: f64,
    atol: f64,
    equal_nan: bool,
) -> bool {
    if a.shape() != b.shape() {
        return false;
    }
    a.iter().zip(b.iter()).all(|(&x, &y)| {
        if x.is_nan() || y.is_nan() {
            return equal_nan && x.is_nan() && y.is_nan();
        }
        if x.is_infinite() || y.is_infinite() {
            return x == y;
        }
        (x - y).abs() <= atol + rtol * y.abs()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allclose_follows_numpy() {
        let a = ArrayD::from_shape_vec(vec![3], vec![1.0, f64::NAN, 1e10]).unwrap();
        let b = ArrayD::from_shape_vec(vec![3], vec![1.0 + 1e-9, f64::NAN, 1.00001e10]).unwrap();
        assert!(!allclose(&a, &b, 1e-5, 1e-8, false));
        assert!(allclose(&a, &b, 1e-5, 1e-8, true));
        let c = ArrayD::from_shape_vec(vec![3], vec![1.1, f64::NAN, 1e10]).unwrap();
        assert!(!allclose(&a, &c, 1e-5, 1e-8, true));
    }

    #[test]
    fn a_loss_by_name_is_never_one_of_its_inputs() {
        let loss = smdebug_core::pyregex::PyRegex::new(LOSS_BY_NAME).unwrap();
        for name in [
            "loss",
            "val_loss",
            "CrossEntropyLoss_output_0",
            "train/Loss",
        ] {
            assert!(loss.is_match(name), "{name}");
        }
        for name in [
            "loss.labels",
            "loss.predictions",
            "CrossEntropyLoss_input_0",
            "CrossEntropyLoss_input_1",
            "fc1.weight",
        ] {
            assert!(!loss.is_match(name), "{name}");
        }
    }
}
