//! Sampled call stacks, resolved, and the figures a summary takes from them.

use std::collections::{BTreeMap, HashMap, HashSet};

use smdebug_format::code_profile::{FunctionSamples, ThreadSamples};

/// One symbol of a stack frame.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct FrameSymbol {
    /// Demangled name.
    pub(crate) name: String,
    /// The raw (mangled) name.
    pub(crate) system_name: String,
    /// Source file, when debug information has it.
    pub(crate) file: Option<String>,
    /// Source line, 0 when unknown.
    pub(crate) line: u32,
}

/// One sampled call stack and how often it was seen.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Stack {
    /// The thread it ran on.
    pub(crate) thread: String,
    /// Frames from the sampled one (the leaf) to the root; each frame's symbols from the
    /// innermost inlined function to the function it was inlined into.
    pub(crate) frames: Vec<Vec<FrameSymbol>>,
    /// Samples of this stack.
    pub(crate) count: u64,
}

/// The name given to a sample whose leaf could not be resolved.
pub(crate) const UNKNOWN_FUNCTION: &str = "[unknown]";

impl Stack {
    /// The function the sampled instruction was in.
    fn leaf(&self) -> &str {
        self.frames
            .first()
            .and_then(|frame| frame.first())
            .map_or(UNKNOWN_FUNCTION, |s| s.name.as_str())
    }

    fn names(&self) -> impl Iterator<Item = &str> {
        self.frames.iter().flatten().map(|s| s.name.as_str())
    }
}

/// What [`summarize`] computes from a window's stacks.
pub(crate) struct StackFigures {
    pub(crate) samples: u64,
    pub(crate) functions: u64,
    pub(crate) threads: Vec<ThreadSamples>,
    pub(crate) top_self: Vec<FunctionSamples>,
    pub(crate) top_total: Vec<FunctionSamples>,
    pub(crate) shared_root_functions: u64,
}

/// The functions every sampled stack shares from its root down, but the deepest: the thread's
/// start-up chain (`thread_start`, `call_once`, `main`, …) that holds 100 % of the samples and
/// says nothing. The deepest shared function is kept: everything ran under it.
fn shared_root(stacks: &[Stack]) -> HashSet<&str> {
    let paths: Vec<Vec<&str>> = stacks
        .iter()
        .filter(|s| s.count > 0)
        .map(|s| {
            s.frames
                .iter()
                .rev()
                .flat_map(|frame| frame.iter().rev())
                .map(|symbol| symbol.name.as_str())
                .collect()
        })
        .collect();
    let Some(first) = paths.first() else {
        return HashSet::new();
    };
    let shared = paths.iter().skip(1).fold(first.len(), |n, path| {
        n.min(first.iter().zip(path).take_while(|(a, b)| a == b).count())
    });
    first[..shared.saturating_sub(1)].iter().copied().collect()
}

/// Samples, threads and the `top` functions by self and by total samples. A function on a
/// stack more than once (recursion, or inlined into itself) counts once per sample in its
/// total. The total list leaves out the [`shared_root`] chain (counted instead).
pub(crate) fn summarize(stacks: &[Stack], top: usize) -> StackFigures {
    let samples: u64 = stacks.iter().map(|s| s.count).sum();
    let mut threads: HashMap<&str, u64> = HashMap::new();
    let mut self_samples: HashMap<&str, u64> = HashMap::new();
    let mut total_samples: HashMap<&str, u64> = HashMap::new();
    for stack in stacks {
        *threads.entry(stack.thread.as_str()).or_default() += stack.count;
        *self_samples.entry(stack.leaf()).or_default() += stack.count;
        let mut seen = HashSet::new();
        for name in stack.names() {
            if seen.insert(name) {
                *total_samples.entry(name).or_default() += stack.count;
            }
        }
        if stack.frames.is_empty() {
            *total_samples.entry(UNKNOWN_FUNCTION).or_default() += stack.count;
        }
    }
    let ranked = |counts: HashMap<&str, u64>| -> Vec<FunctionSamples> {
        // Most samples first, ties by name, so the order is the same on every run.
        let sorted: BTreeMap<(std::cmp::Reverse<u64>, &str), ()> = counts
            .into_iter()
            .map(|(name, n)| ((std::cmp::Reverse(n), name), ()))
            .collect();
        sorted
            .into_keys()
            .take(top)
            .map(|(std::cmp::Reverse(n), name)| FunctionSamples {
                function: name.to_owned(),
                samples: n,
                share: if samples == 0 {
                    0.0
                } else {
                    n as f64 / samples as f64
                },
            })
            .collect()
    };
    let functions = total_samples.len() as u64;
    let root = shared_root(stacks);
    let shared_root_functions = root.len() as u64;
    total_samples.retain(|name, _| !root.contains(name));
    let mut threads: Vec<ThreadSamples> = threads
        .into_iter()
        .map(|(thread, samples)| ThreadSamples {
            thread: thread.to_owned(),
            samples,
        })
        .collect();
    threads.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.thread.cmp(&b.thread)));
    StackFigures {
        samples,
        functions,
        threads,
        top_self: ranked(self_samples),
        top_total: ranked(total_samples),
        shared_root_functions,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn symbol(name: &str) -> FrameSymbol {
        FrameSymbol {
            name: name.to_owned(),
            system_name: format!("_ZN{name}"),
            file: Some("src/lib.rs".to_owned()),
            line: 7,
        }
    }

    /// `frames` leaf first, one symbol per frame unless a frame is given as `a+b` (a inlined
    /// into b).
    pub(crate) fn stack(thread: &str, frames: &[&str], count: u64) -> Stack {
        Stack {
            thread: thread.to_owned(),
            frames: frames
                .iter()
                .map(|f| f.split('+').map(symbol).collect())
                .collect(),
            count,
        }
    }

    #[test]
    fn self_counts_the_leaf_and_total_counts_every_function_once_per_sample() {
        let stacks = [
            stack("main", &["hot", "step", "main"], 6),
            stack("main", &["mul+hot", "step", "main"], 2),
            stack("main", &["rec", "rec", "step", "main"], 1),
            stack("writer", &["write", "writer_loop"], 1),
        ];
        let figures = summarize(&stacks, 3);
        assert_eq!(figures.samples, 10);
        assert_eq!(figures.functions, 7);
        let pairs = |v: &[FunctionSamples]| -> Vec<(String, u64)> {
            v.iter().map(|f| (f.function.clone(), f.samples)).collect()
        };
        assert_eq!(
            pairs(&figures.top_self),
            [("hot".into(), 6), ("mul".into(), 2), ("rec".into(), 1)]
        );
        assert_eq!(
            pairs(&figures.top_total),
            [("main".into(), 9), ("step".into(), 9), ("hot".into(), 8)]
        );
        assert!((figures.top_total[0].share - 0.9).abs() < 1e-12);
        // Two threads share no root: nothing is left out.
        assert_eq!(figures.shared_root_functions, 0);
        assert_eq!(figures.threads[0].thread, "main");
        assert_eq!(figures.threads[0].samples, 9);
    }

    #[test]
    fn the_start_up_chain_every_stack_shares_is_left_out_of_the_total_list_but_its_deepest() {
        let stacks = [
            stack("main", &["hot", "step", "train", "main", "start"], 6),
            stack("main", &["load", "train", "main", "start"], 2),
        ];
        let figures = summarize(&stacks, 10);
        assert_eq!(figures.shared_root_functions, 2);
        let names: Vec<&str> = figures
            .top_total
            .iter()
            .map(|f| f.function.as_str())
            .collect();
        assert_eq!(names, ["train", "hot", "step", "load"]);
        // One stack alone: its whole chain is shared, its leaf is kept.
        let one = summarize(&[stack("main", &["hot", "main", "start"], 3)], 10);
        assert_eq!(one.top_total.len(), 1);
        assert_eq!(one.top_total[0].function, "hot");
    }

    #[test]
    fn a_window_without_samples_has_no_functions() {
        let figures = summarize(&[], 10);
        assert_eq!(figures.samples, 0);
        assert!(figures.top_self.is_empty() && figures.threads.is_empty());
    }

    #[test]
    fn a_stack_without_frames_counts_as_unknown() {
        let figures = summarize(&[stack("main", &[], 4)], 10);
        assert_eq!(figures.top_self[0].function, UNKNOWN_FUNCTION);
        assert_eq!(figures.top_total[0].samples, 4);
    }
}
