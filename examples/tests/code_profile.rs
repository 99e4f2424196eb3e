//! A code profile of the digits MLP training in-process: a window over steps 20–319 of the
//! 64-256-256-10 model names its forward and backward passes, with a sample count that
//! matches the CPU time the window used.

#![cfg(target_os = "linux")]

use std::sync::Arc;

use smdebug_core::Mode;
use smdebug_profiler::code::{CodeProfileConfig, CodeProfiler};
use smdebug_profiler::system::NodeId;
use smdebug_read::profile::ProfilerReader;
use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;

use smdebug_examples::digits::{self, Digits};
use smdebug_examples::mlp::{Activation, Mlp, Rng};

#[test]
fn a_window_over_mlp_training_names_its_forward_and_backward_passes() {
    let data = Digits::load(&digits::default_path()).unwrap();
    let mut rng = Rng::new(7);
    let order = rng.permutation(data.len());
    let batches: Vec<_> = order.chunks(128).map(|b| data.batch(b)).collect();
    let mut model = Mlp::new(&[64, 256, 256, 10], Activation::Relu, 1.0, 0.0, &mut rng);

    let run = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(run.path()).unwrap());
    let profiler = CodeProfiler::start(
        CodeProfileConfig::default()
            .node(NodeId::algo(1))
            .top_functions(200),
        Arc::clone(&storage),
    )
    .unwrap();
    // The window opens within milliseconds: sampled from its first step once the sampler is
    // ready (its label would otherwise say how much of the window was sampled).
    assert!(profiler.wait_ready(std::time::Duration::from_secs(60)));
    let (first, last) = (20u64, 319u64);
    for step in 0..=last + 5 {
        if step == first {
            profiler.begin(Some((Mode::Train, step))).unwrap();
        }
        let (x, y) = &batches[step as usize % batches.len()];
        let fwd = model.forward(x);
        let grads = model.backward(&fwd, y);
        model.sgd(&grads, 0.01);
        if step == last {
            profiler.end(Some((Mode::Train, step))).unwrap();
        }
    }
    let report = profiler.finish().unwrap();
    assert_eq!((report.written, report.failed), (1, 0));

    let reader = ProfilerReader::new(storage);
    let profiles = reader.code_profiles().unwrap();
    assert_eq!(profiles.windows.len(), 1);
    let window = &profiles.windows[0];
    let summary = &window.summary;
    assert_eq!(summary.steps_label(), "TRAIN steps 20–319");
    assert_eq!(summary.node_id, "algo-1");

    let cpu = summary.process_cpu_seconds.unwrap();
    let expected = cpu * f64::from(summary.frequency_hz);
    let samples = summary.samples as f64;
    // The process's CPU time counts every thread, and SIGPROF ticks that fall due while a
    // signal is pending merge into one, so fewer samples than CPU time × frequency is normal
    // (156 for 3.19 CPU s was seen on a 2-core machine); the bounds catch a profile that did not
    // sample the window, or sampled outside it.
    assert!(
        samples > 0.25 * expected && samples < 1.5 * expected + 10.0,
        "{samples} samples for {cpu} CPU seconds"
    );

    let pass = |suffix: &str| {
        summary
            .top_total
            .iter()
            .find(|f| f.function.contains("Mlp") && f.function.ends_with(suffix))
            .unwrap_or_else(|| panic!("no Mlp{suffix} in {:?}", summary.top_total))
    };
    let (forward, backward) = (pass("::forward"), pass("::backward"));
    // Together the two passes hold most of the step's CPU time.
    assert!(
        forward.share + backward.share > 0.5,
        "{forward:?} {backward:?}"
    );
    let svg = reader
        .code_profile_flamegraph(&window.file)
        .unwrap()
        .unwrap();
    let svg = String::from_utf8(svg.to_vec()).unwrap();
    assert!(svg.contains("::backward") && svg.contains("TRAIN steps 20–319"));
}
