//! Kineto (PyTorch profiler) traces given by path, summarized once each and again only when
//! the file changes (its size or modification time).

use std::path::PathBuf;
use std::time::SystemTime;

use super::problems::DataProblem;
use crate::kineto::{RankSummary, summarize_trace, summarize_traces};

/// What a trace file looked like when it was summarized.
type Stamp = Option<(u64, Option<SystemTime>)>;

/// The Kineto traces a follower watches.
#[derive(Debug, Default)]
pub struct KinetoTraces {
    paths: Vec<PathBuf>,
    /// Per path: the stamp summarized and its summary (`None` when it failed).
    read: Vec<Option<(Stamp, Option<RankSummary>)>>,
}

fn stamp(path: &std::path::Path) -> Stamp {
    std::fs::metadata(path)
        .ok()
        .map(|m| (m.len(), m.modified().ok()))
}

impl KinetoTraces {
    /// Watches `paths` (one trace file per rank, plain or gzip-compressed).
    pub fn new(paths: Vec<PathBuf>) -> KinetoTraces {
        let read = vec![None; paths.len()];
        KinetoTraces { paths, read }
    }

    /// Whether no path is watched.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// Summarizes the traces that are new or changed. `Some(all summaries, ordered by rank)`
    /// when any changed; each trace that cannot be summarized is a problem (and is tried again
    /// once it changes).
    pub fn poll(&mut self, problems: &mut Vec<DataProblem>) -> Option<Vec<RankSummary>> {
        let due: Vec<(usize, Stamp)> = self
            .paths
            .iter()
            .enumerate()
            .map(|(i, p)| (i, stamp(p)))
            .filter(|(i, s)| {
                // A missing file is tried once, then again when it appears.
                self.read[*i].as_ref().is_none_or(|(seen, _)| seen != s)
            })
            .collect();
        if due.is_empty() {
            return None;
        }
        let paths: Vec<&PathBuf> = due.iter().map(|(i, _)| &self.paths[*i]).collect();
        // All at once (in parallel); one failure fails the batch, then one by one.
        let summaries: Vec<Result<RankSummary, String>> = match summarize_traces(&paths) {
            Ok(report) if report.ranks.len() == paths.len() => {
                // `summarize_traces` orders by rank: match summaries back by file.
                paths
                    .iter()
                    .map(|p| {
                        let file = p.display().to_string();
                        report
                            .ranks
                            .iter()
                            .find(|r| r.file == file)
                            .cloned()
                            .ok_or_else(|| format!("{file}: no summary"))
                    })
                    .collect()
            }
            _ => paths
                .iter()
                .map(|p| summarize_trace(p).map_err(|e| e.to_string()))
                .collect(),
        };
        for ((i, stamp), summary) in due.into_iter().zip(summaries) {
            let kept = match summary {
                Ok(s) => Some(s),
                Err(e) => {
                    problems.push(DataProblem::kineto(&self.paths[i], e));
                    None
                }
            };
            self.read[i] = Some((stamp, kept));
        }
        Some(self.summaries())
    }

    /// Every trace summarized, ordered by rank (files of one rank in the order given).
    pub fn summaries(&self) -> Vec<RankSummary> {
        let mut ranks: Vec<RankSummary> = self
            .read
            .iter()
            .filter_map(|r| r.as_ref().and_then(|(_, s)| s.clone()))
            .collect();
        ranks.sort_by_key(|r| r.rank);
        ranks
    }
}
