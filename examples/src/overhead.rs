//! What the adapter examples share: where their run goes, the CNN examples' session, and for
//! their `--overhead` modes the
//! sink that drops records, their command-line numbers, and the table they print (seconds per step for four variants of one training loop,
//! measured in alternating rounds).

use smdebug::storage::Location;
use smdebug_core::{Record, Sink};

/// A sink that drops every record: what an adapter and the hook cost without storage.
#[derive(Clone, Copy, Debug, Default)]
pub struct Discard;

impl Sink for Discard {
    fn send(&mut self, record: Record) {
        drop(record);
    }
}

/// The value after `flag` in `args`, parsed; `default` when the flag is absent.
pub fn number_arg<T: std::str::FromStr>(
    args: &[String],
    flag: &str,
    default: T,
) -> Result<T, String> {
    match args.iter().position(|a| a == flag) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{flag} needs a number")),
    }
}

/// Where an adapter example writes its run: the value after `--out` in `args` (a directory or
/// an object-store URL, refused when it names neither), or `target/<default>` in the
/// workspace. The example's session replaces a run left there by an earlier start
/// (`SessionBuilder::overwrite`).
pub fn run_location(args: &[String], default: &str) -> Result<Location, String> {
    match args.iter().position(|a| a == "--out") {
        Some(i) => {
            let out = args.get(i + 1).ok_or("--out needs a location")?;
            Location::parse(out).map_err(|e| format!("--out: {e}"))
        }
        None => {
            let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .ok_or("the examples crate sits in the workspace")?;
            Ok(Location::Local(workspace.join("target").join(default)))
        }
    }
}

/// The run location `out` (a directory or an object-store URL) with a local directory created
/// and made absolute, so that the commands an example prints work from anywhere.
pub fn prepared_location(out: &str) -> Result<Location, Box<dyn std::error::Error>> {
    match Location::parse(out)? {
        Location::Local(dir) => {
            std::fs::create_dir_all(&dir)?;
            Ok(Location::Local(dir.canonicalize()?))
        }
        store => Ok(store),
    }
}

/// One variant of an `--overhead` loop, run alone in its process (`--one bare` or `--one
/// unselected`, with `--steps N`): for instruction counts under `valgrind --tool=callgrind`,
/// where two processes that differ only by the variant and by their step count give a step's
/// instructions exactly, whatever else the machine is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum One {
    /// No hook.
    Bare,
    /// The model registered whole with a hook that selects none of its tensors
    /// ([`losses_only`]), recording into [`Discard`].
    Unselected,
}

/// The variant after `--one` in `args`, if any.
pub fn one_arg(args: &[String]) -> Result<Option<One>, String> {
    match args.iter().position(|a| a == "--one") {
        None => Ok(None),
        Some(i) => match args.get(i + 1).map(String::as_str) {
            Some("bare") => Ok(Some(One::Bare)),
            Some("unselected") => Ok(Some(One::Unselected)),
            other => Err(format!(
                "--one needs `bare` or `unselected`, got {}",
                other.unwrap_or("nothing")
            )),
        },
    }
}

/// A hook that saves the losses alone at every step: with a whole model registered, every
/// layer is a capture point and none of them is selected.
pub fn losses_only() -> smdebug_core::HookBuilder {
    smdebug_core::Hook::builder()
        .save_config(smdebug_core::SaveConfig::every(1))
        .include_collections(&["losses"])
}

/// The session the CNN examples (candle's and burn's) train in, before the framework is named
/// (`.candle()`, `.burn()`): weights, gradients and losses every 50th TRAIN step; the model's
/// layer inputs and outputs in training only (on the 359 test images they are 13 MB a step);
/// the loss's inputs at every evaluation (the held-out images), for ClassImbalance and
/// Confusion, since a collection a rule asks for is otherwise saved on the rule's schedule; a
/// span per layer over steps 20-29 and a sampling CPU profile over steps 40-59; the debugging
/// rules that read those tensors, then `profiler_rules`. `--python-compatible` in `args` asks
/// for files Python smdebug reads.
pub fn cnn_session(
    out: &Location,
    args: &[String],
    profiler_rules: &[&str],
) -> smdebug::SessionBuilder {
    use smdebug_core::{Collection, Mode, SaveConfig, SaveConfigMode};
    let eval_only =
        SaveConfig::new(SaveConfigMode::never()).with_mode(Mode::Eval, SaveConfigMode::every(1));
    let train_only = SaveConfig::every(50).with_mode(Mode::Eval, SaveConfigMode::never());
    smdebug::Session::builder(out)
        .overwrite(true)
        .python_compatible(args.iter().any(|a| a == "--python-compatible"))
        .save(SaveConfig::every(50).with_mode(Mode::Eval, SaveConfigMode::every(1)))
        .collection(Collection::new("outputs").with_save_config(train_only.clone()))
        .collection(Collection::new("inputs").with_save_config(train_only))
        .collection(Collection::new("labels").with_save_config(eval_only.clone()))
        .collection(Collection::new("predictions").with_save_config(eval_only))
        .detailed_profiling(smdebug_core::window::Window::steps(20, 10))
        .code_profiling(smdebug_core::window::Window::steps(40, 20))
        .rules([
            "VanishingGradient",
            "ExplodingTensor",
            "LossNotDecreasing",
            "DeadRelu",
        ])
        .rules(["ClassImbalance", "Confusion"])
        .rules(profiler_rules.iter().copied())
}

/// The variants, in the order of each row's values.
pub const VARIANTS: [&str; 4] = [
    "no hook",
    "every step, to files",
    "every 100th step, to files",
    "every step, records dropped",
];

/// The mean of `values` and the half-width of its 95 % confidence interval (Student's t, the
/// values taken as independent draws); NaN for fewer than two values.
pub fn mean_ci95(values: &[f64]) -> (f64, f64) {
    let n = values.len();
    if n < 2 {
        return (f64::NAN, f64::NAN);
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let var = values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    // t(0.975) for 1 to 30 degrees of freedom; 1.96 beyond (within 2 % of the true value).
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    let t = T.get(n - 2).copied().unwrap_or(1.96);
    (mean, t * (var / n as f64).sqrt())
}

/// The median of `values` (the mean of the middle two for an even count); NaN when empty.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

/// Each variant's cost over the no-hook loop of the same round, in percent, per round.
pub fn overheads(rows: &[[f64; 4]]) -> Vec<[f64; 3]> {
    rows.iter()
        .map(|r| [1, 2, 3].map(|i| (r[i] / r[0] - 1.0) * 100.0))
        .collect()
}

/// Prints one line per round (µs per step, and each variant's cost over that round's no-hook
/// loop), then the medians.
pub fn print_table(title: &str, rows: &[[f64; 4]]) {
    println!("{title}");
    println!(
        "round  {:>10}  {:>22}  {:>26}  {:>27}",
        VARIANTS[0], VARIANTS[1], VARIANTS[2], VARIANTS[3]
    );
    let pct = overheads(rows);
    let line = |label: &str, us: [f64; 4], p: [f64; 3]| {
        println!(
            "{label:<5}  {:>7.1} µs  {:>9.1} µs ({:>+7.1}%)  {:>13.1} µs ({:>+7.1}%)  {:>14.1} µs ({:>+7.1}%)",
            us[0], us[1], p[0], us[2], p[1], us[3], p[2]
        );
    };
    for (i, (r, p)) in rows.iter().zip(&pct).enumerate() {
        line(&i.to_string(), r.map(|s| s * 1e6), *p);
    }
    let col = |i: usize| median(&rows.iter().map(|r| r[i] * 1e6).collect::<Vec<_>>());
    let pcol = |i: usize| median(&pct.iter().map(|p| p[i]).collect::<Vec<_>>());
    line(
        "med.",
        [col(0), col(1), col(2), col(3)],
        [pcol(0), pcol(1), pcol(2)],
    );
}

/// Prints what registering a whole model costs when none of its tensors is selected: each row
/// `[bare, registered]` seconds a step of one round; the medians and their difference.
pub fn print_registered(rows: &[[f64; 2]]) {
    let col = |i: usize| median(&rows.iter().map(|r| r[i] * 1e6).collect::<Vec<_>>());
    let (bare, registered) = (col(0), col(1));
    println!(
        "every layer registered, none of its tensors selected (the loss alone saved, into a sink that drops it): {registered:.1} µs a step against {bare:.1} µs bare ({:+.2} %)",
        (registered / bare - 1.0) * 100.0
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mean_comes_with_students_interval() {
        // 1..=5: mean 3, standard error √2.5/√5 = 0.7071, t(4) = 2.776.
        let (mean, half) = mean_ci95(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(mean, 3.0);
        assert!((half - 2.776 * 0.5f64.sqrt()).abs() < 1e-9, "{half}");
        // Past 31 values the normal quantile.
        let many: Vec<f64> = (0..40).map(|i| f64::from(i % 2)).collect();
        let (mean, half) = mean_ci95(&many);
        let sd = (40.0 * 0.25 / 39.0f64).sqrt();
        assert_eq!(mean, 0.5);
        assert!((half - 1.96 * sd / 40f64.sqrt()).abs() < 1e-9, "{half}");
        assert!(mean_ci95(&[1.0]).0.is_nan());
    }

    #[test]
    fn number_args_parse_or_say_which_flag_is_wrong() {
        let args: Vec<String> = ["--overhead", "--rounds", "3", "--steps", "x"]
            .map(String::from)
            .to_vec();
        assert_eq!(number_arg(&args, "--rounds", 7), Ok(3));
        assert_eq!(number_arg(&args, "--epochs", 10), Ok(10));
        assert_eq!(
            number_arg::<usize>(&args, "--steps", 1),
            Err("--steps needs a number".to_string())
        );
        assert_eq!(one_arg(&args), Ok(None));
        let one = |v: &str| one_arg(&["--one".to_string(), v.to_string()]);
        assert_eq!(one("bare"), Ok(Some(One::Bare)));
        assert_eq!(one("unselected"), Ok(Some(One::Unselected)));
        assert!(one("all").unwrap_err().contains("got all"));
    }

    #[test]
    fn medians_and_overheads_are_taken_per_round() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
        let rows = [[1.0, 1.5, 1.01, 1.1], [2.0, 2.0, 2.2, 1.0]];
        let p = overheads(&rows);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(p[0][0], 50.0) && close(p[0][1], 1.0) && close(p[0][2], 10.0));
        assert!(close(p[1][0], 0.0) && close(p[1][1], 10.0) && close(p[1][2], -50.0));
    }
}
