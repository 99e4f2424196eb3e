//! The runner hands an attached Reporter its own state: the statuses with the parameters in
//! force, its trial, and the system metrics its profiler feed read; the plan the reporter
//! makes is what `ProfilerReport`'s status says, before the report is written.

use std::sync::{Arc, Mutex};

use smdebug_core::{Hook, Mode, SaveConfig};
use smdebug_format::system::system_file_key;
use smdebug_io::writer::Writer;
use smdebug_rules::{ReportPlan, Reporter, RuleRunner, RuleSpec, RunState, Status};
use smdebug_storage::LocalStorage;
use smdebug_storage::Storage;

const START_S: u64 = 1_700_000_000;

/// Ten steps of a loss and 20 CPU samples, one a second.
fn record(run: &std::path::Path) {
    let location = run.to_str().unwrap();
    let mut hook = Hook::builder()
        .save_config(SaveConfig::every(1))
        .build(Writer::open(location).unwrap())
        .unwrap();
    hook.set_mode(Mode::Train);
    for step in 0..10u64 {
        hook.save_scalar("loss", 1.0 / (step as f64 + 1.0), &["losses"]);
        hook.step();
    }
    hook.close();
    let mut text = String::new();
    for i in 0..20 {
        text.push_str(&format!(
            "{{\"Type\":\"cpu\",\"Name\":\"total\",\"Dimension\":\"CPUUtilization\",\
             \"Value\":{},\"NodeId\":\"algo-1\",\"Timestamp\":{}}}\n",
            40 + i,
            START_S as f64 + f64::from(i) + 0.5
        ));
    }
    LocalStorage::new(run)
        .unwrap()
        .put(
            &system_file_key(START_S, "algo-1"),
            text.into_bytes().into(),
        )
        .unwrap();
}

/// What the reporter saw, per call.
#[derive(Clone, Debug, Default)]
struct Seen {
    prepared: Vec<(Status, usize, usize, bool, serde_json::Value)>,
    written_report_status: Vec<(Status, String)>,
}

struct Recorder {
    seen: Arc<Mutex<Seen>>,
    problems: Vec<String>,
}

impl Reporter for Recorder {
    fn prepare(&mut self, run: &RunState<'_>) -> ReportPlan {
        let cpu = run.summary.rule("CPUBottleneck").unwrap();
        let points = run.profile.sample_count() as usize;
        self.seen.lock().unwrap().prepared.push((
            cpu.status,
            run.profile.series_count(),
            points,
            run.trial.is_some(),
            cpu.parameters.to_value()["cpu_threshold"].clone(),
        ));
        ReportPlan {
            destination: Ok("somewhere".into()),
            problems: self.problems.clone(),
        }
    }

    fn write(&mut self, run: &RunState<'_>) -> Result<(), smdebug_rules::ReportWriteError> {
        let own = run.summary.rule("ProfilerReport").unwrap();
        self.seen
            .lock()
            .unwrap()
            .written_report_status
            .push((own.status, own.message.clone()));
        Ok(())
    }
}

fn run_with(problems: Vec<String>) -> (Seen, smdebug_rules::Summary) {
    run_with_specs(problems, &[])
}

/// ProfilerReport and `more` rules.
fn run_with_specs(problems: Vec<String>, more: &[&str]) -> (Seen, smdebug_rules::Summary) {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    record(&run);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut builder = RuleRunner::builder(&run)
        .spec(RuleSpec::parse("ProfilerReport:CPUBottleneck_cpu_threshold=80").unwrap());
    for spec in more {
        builder = builder.spec(RuleSpec::parse(spec).unwrap());
    }
    let summary = builder
        .reporter(Recorder {
            seen: seen.clone(),
            problems,
        })
        .write_into_run(false)
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let seen = seen.lock().unwrap().clone();
    (seen, summary)
}

#[test]
fn the_reporter_gets_the_statuses_trial_and_profiler_data_the_runner_holds() {
    let (seen, summary) = run_with(Vec::new());
    // Called once, at the end, after the rules finished.
    assert_eq!(seen.prepared.len(), 1);
    let (status, series, points, trial, threshold) = seen.prepared[0].clone();
    // CPU samples and no GPU: CPUBottleneck had nothing to check.
    assert_eq!(status, Status::NoData);
    // No rule reads tensors: the runner opened no trial (the run has profiler data).
    assert_eq!((series, points, trial), (1, 20, false));
    assert_eq!(threshold, 80.0);
    // The page sees ProfilerReport's status as the plan made it: the rules that checked
    // something (OverallSystemUsage) found nothing, and the report goes somewhere.
    let [(status, message)] = &seen.written_report_status[..] else {
        panic!("{:?}", seen.written_report_status);
    };
    assert_eq!(*status, Status::NoIssuesFound);
    assert!(
        message.contains("1 checked and found no issues")
            && message.ends_with("; report: somewhere"),
        "{message}"
    );
    let own = summary.rule("ProfilerReport").unwrap();
    assert_eq!(
        own.details,
        smdebug_rules::RuleDetails::Report(smdebug_rules::ReportDetails {
            report: "somewhere".into()
        })
    );
}

#[test]
fn with_a_rule_that_reads_tensors_the_reporter_gets_the_trial_too() {
    let (seen, _) = run_with_specs(Vec::new(), &["LossNotDecreasing"]);
    assert!(seen.prepared[0].3, "no trial");
}

#[test]
fn problems_with_the_reports_inputs_put_profiler_report_in_error_before_it_is_drawn() {
    let (seen, summary) = run_with(vec!["trace.json: no such file.".into()]);
    assert_eq!(seen.written_report_status[0].0, Status::Error);
    let own = summary.rule("ProfilerReport").unwrap();
    assert_eq!(own.status, Status::Error);
    assert!(
        own.message
            .ends_with("; report: somewhere; trace.json: no such file."),
        "{}",
        own.message
    );
}

#[test]
fn without_a_reporter_profiler_report_says_no_report_was_drawn() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    record(&run);
    let summary = RuleRunner::builder(&run)
        .spec(RuleSpec::parse("ProfilerReport").unwrap())
        .write_into_run(false)
        .build()
        .unwrap()
        .run_offline()
        .unwrap();
    let own = summary.rule("ProfilerReport").unwrap();
    assert_eq!(own.status, Status::NoIssuesFound);
    assert!(
        own.message.contains("no report was drawn"),
        "{}",
        own.message
    );
    assert_eq!(summary.rules.len(), 12);
}
