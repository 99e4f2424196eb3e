//! The pushed deltas (`/api/events`): a page connected to a live run gets, over many pushes,
//! exactly the step spans and system samples the run has (no duplicate, no gap: the union of
//! its deltas is what the full views list at the end), and exactly the rule verdicts that
//! changed; no scalar values (the page fetches scalar charts, downsampled by the server). A new connection and a reset run get the `refetch`
//! flag instead. (A page that lags gets one merged delta, or the flag when too much is new:
//! `delta.rs`'s unit tests, which drive the cursor directly.)

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use smdebug_serve::{ServeOptions, Server};
use smdebug_storage::LocalStorage;
use support::{JobConfig, events, get_json, start_job};

fn next(rx: &mpsc::Receiver<Value>) -> Value {
    rx.recv_timeout(Duration::from_secs(30))
        .expect("no push within 30 s")
}

#[derive(Default)]
struct Seen {
    /// (mode, node, worker) → step starts, in arrival order.
    steps: BTreeMap<String, Vec<(u64, f64)>>,
    /// (node, type, name, dimension) → sample times.
    samples: BTreeMap<String, Vec<f64>>,
    pushes: usize,
    with_data: usize,
}

impl Seen {
    fn take(&mut self, delta: &Value) {
        assert_eq!(delta["refetch"], false, "{delta}");
        self.pushes += 1;
        let mut any = false;
        for s in delta["new_steps"].as_array().unwrap() {
            let key = format!("{} {} {}", s["mode"], s["node"], s["worker"]);
            let column = |k: &str| s[k].as_array().unwrap().clone();
            let (steps, starts) = (column("step"), column("start"));
            assert_eq!(steps.len(), starts.len());
            assert_eq!(steps.len(), column("duration").len());
            self.steps.entry(key).or_default().extend(
                steps
                    .iter()
                    .zip(&starts)
                    .map(|(n, t)| (n.as_u64().unwrap(), t.as_f64().unwrap())),
            );
            any = true;
        }
        for s in delta["new_samples"].as_array().unwrap() {
            let key = format!(
                "{} {} {} {}",
                s["node"], s["type"], s["name"], s["dimension"]
            );
            let times = self.samples.entry(key).or_default();
            times.extend(
                s["t"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t.as_f64().unwrap()),
            );
            any = true;
        }
        assert!(delta.get("new_scalars").is_none(), "{delta}");
        self.with_data += usize::from(any);
    }
}

impl Seen {
    fn totals(&self) -> [usize; 2] {
        [
            self.steps.values().map(Vec::len).sum(),
            self.samples.values().map(Vec::len).sum(),
        ]
    }
}

/// Step spans and timeline samples the full views hold.
fn totals(url: &str) -> [usize; 2] {
    let count = |v: &Value, list: &str, f: &dyn Fn(&Value) -> u64| -> usize {
        v[list]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| f(x) as usize)
            .sum()
    };
    let steps = get_json(&format!("{url}/api/runs/0/steps?last=1&points=2000"));
    let system = get_json(&format!("{url}/api/runs/0/system?points=2000"));
    [
        count(&steps, "series", &|s| s["count"].as_u64().unwrap()),
        count(&system, "series", &|s| s["data"]["total"].as_u64().unwrap()),
    ]
}

#[test]
fn a_page_gets_exactly_the_new_steps_samples_and_changed_verdicts_in_its_pushes() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let location = run.to_str().unwrap().to_owned();
    let server = Server::start(ServeOptions::new(vec![location.clone()])).unwrap();
    let url = server.url().trim_end_matches('/').to_owned();
    let rx = events(&url);
    // The first push to a page: fetch everything (it holds nothing yet).
    let first = next(&rx);
    assert_eq!(first["deltas"][0]["refetch"], true, "{first}");
    assert_eq!(first["deltas"][0]["refetch_reason"], "the page connected");

    let job = start_job(
        Arc::new(LocalStorage::new(&run).unwrap()),
        Some(&run),
        JobConfig {
            steps: 150,
            step_time: Duration::from_millis(20),
            sampler: true,
            start_delay: Duration::ZERO,
            slow_steps: (1..=12).map(|i| i * 10).collect(),
        },
    );
    let mut seen = Seen::default();
    // While the job runs, then until the pushes hold as many points as the full views (the
    // comparisons below then find any duplicate or gap).
    while !job.handle.as_ref().unwrap().is_finished() {
        seen.take(&next(&rx)["deltas"][0]);
    }
    // The server follows the files after the job wrote them, so on a loaded machine the views
    // can lag the job's end: the comparison waits until they hold all of its 150 steps too.
    // A run's last steps are taken in once a later listing confirms them, so the pushes and
    // the views can agree for a moment before the server has read everything: they must agree,
    // with the views unchanged, for 1.5 s (the server polls every 200 ms).
    let end = Instant::now() + Duration::from_secs(60);
    let mut agreed: Option<(Instant, [usize; 2])> = None;
    loop {
        let view = totals(&url);
        if seen.totals() == view && view[0] >= 150 {
            match agreed {
                Some((since, held)) if held == view => {
                    if since.elapsed() >= Duration::from_millis(1500) {
                        break;
                    }
                }
                _ => agreed = Some((Instant::now(), view)),
            }
        } else {
            agreed = None;
        }
        assert!(
            Instant::now() < end,
            "pushed {:?}, the views hold {view:?}",
            seen.totals()
        );
        if let Ok(push) = rx.recv_timeout(Duration::from_millis(500)) {
            seen.take(&push["deltas"][0]);
        }
    }
    drop(job);
    assert!(
        seen.with_data >= 3,
        "the run's data came in {} pushes with data of {}",
        seen.with_data,
        seen.pushes
    );

    // Steps: every step span once, as the full view lists them.
    let steps = get_json(&format!("{url}/api/runs/0/steps?last=1&points=2000"));
    let mut total = 0;
    for s in steps["series"].as_array().unwrap() {
        let key = format!("{} {} {}", s["mode"], s["node"], s["worker"]);
        let pushed = &seen.steps[&key];
        let starts: Vec<f64> = s["data"]["t"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_f64().unwrap())
            .collect();
        assert_eq!(s["count"].as_u64().unwrap() as usize, starts.len());
        let mut got: Vec<f64> = pushed.iter().map(|p| p.1).collect();
        got.sort_by(f64::total_cmp);
        assert_eq!(got, starts, "{key}: the pushed step starts");
        let step_numbers: BTreeSet<u64> = pushed.iter().map(|p| p.0).collect();
        assert_eq!(
            step_numbers.len(),
            pushed.len(),
            "{key}: a step pushed twice"
        );
        total += pushed.len();
    }
    assert!(total >= 150, "{total} steps pushed");
    assert_eq!(seen.steps.len(), steps["series"].as_array().unwrap().len());

    // Samples: every sample of every timeline once.
    let system = get_json(&format!("{url}/api/runs/0/system?points=2000"));
    let series = system["series"].as_array().unwrap();
    assert!(!series.is_empty());
    for s in series {
        let key = format!(
            "{} {} {} {}",
            s["node"], s["type"], s["name"], s["dimension"]
        );
        let times: Vec<f64> = s["data"]["t"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_f64().unwrap())
            .collect();
        assert_eq!(
            s["data"]["total"].as_u64().unwrap() as usize,
            times.len(),
            "{key}: not downsampled"
        );
        let mut got = seen.samples.get(&key).cloned().unwrap_or_default();
        got.sort_by(f64::total_cmp);
        assert_eq!(got, times, "{key}: the pushed sample times");
    }
    assert_eq!(
        seen.samples.len(),
        series.len(),
        "{:?}",
        seen.samples.keys()
    );

    // Verdicts: the rules' first statuses, then only the one that changed.
    let mut summary = support::offline_rules(&location, &["StepOutlier", "LowGPUUtilization"]);
    support::write_rules(&run, &summary);
    let changed = |rx: &mpsc::Receiver<Value>| -> Vec<String> {
        loop {
            let push = next(rx);
            let rules = push["deltas"][0]["changed_rules"].as_array().unwrap();
            if !rules.is_empty() {
                return rules
                    .iter()
                    .map(|r| r["name"].as_str().unwrap().to_owned())
                    .collect();
            }
        }
    };
    assert_eq!(changed(&rx), ["StepOutlier", "LowGPUUtilization"]);
    summary.rules[1].message = "a new message".into();
    support::write_rules(&run, &summary);
    let push_rules = changed(&rx);
    assert_eq!(push_rules, ["LowGPUUtilization"]);
    // The pushed view is the overview's.
    let over = get_json(&format!("{url}/api/runs/0/overview"));
    let gpu = over["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "LowGPUUtilization")
        .unwrap();
    assert_eq!(gpu["message"], "a new message");

    // A second page gets the refetch flag first, then deltas like the first page.
    let other = events(&url);
    assert_eq!(next(&other)["deltas"][0]["refetch"], true);
    server.shutdown();
}
