//! Reading the profiler-config file, at start and again while the job runs.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use smdebug_core::config_keys::UnappliedKey;
use smdebug_io::sagemaker::{ConfigSources, FileStamp, read_config_file};

use super::model::ProfilerConfig;
use crate::system::ProfilerError;

impl ProfilerConfig {
    /// Reads the profiler-config file at `path`: `Ok(None)` when it does not exist (the code's
    /// settings stand); an error naming the file, the key and the value when it cannot be read
    /// or does not parse.
    pub fn read(path: &Path) -> Result<Option<ProfilerConfig>, ProfilerError> {
        match read_config_file(path)? {
            None => Ok(None),
            Some(text) => ProfilerConfig::from_json_in(&text, path).map(Some),
        }
    }

    /// Reads the profiler-config file `sources` names (`SMPROFILER_CONFIG_PATH`, else
    /// SageMaker's `/opt/ml/input/config/profilerconfig.json`), as [`read`](Self::read).
    pub fn load(sources: &ConfigSources) -> Result<Option<ProfilerConfig>, ProfilerError> {
        ProfilerConfig::read(sources.profiler_config_path())
    }
}

/// Watches the profiler-config file while the job runs, as Python smdebug re-reads it at every
/// step, so that a profiling window can be opened on a running job.
///
/// [`poll`](Self::poll) is cheap: one `stat` of the file, and a read only when the stat
/// changed or the file was modified within [`FileStamp::GRANULARITY`] of the last read (a
/// rewrite in the same clock tick keeps its stamp, so then the content is compared). It
/// returns the new configuration once, when the file's content changed and parses.
///
/// - A file broken by an edit is logged (`log::error!`, naming the file, the key and the
///   value), and the last good configuration stays in force: it never stops the job. (smdebug
///   turns profiling off until the file is mended.)
/// - A file that appears after start is read when it appears.
/// - A file that disappears leaves the last configuration in force (logged once). (smdebug
///   turns profiling off.)
/// - A file that cannot be read (replaced by a FIFO or a device, over
///   [`MAX_CONFIG_FILE_BYTES`](smdebug_io::sagemaker::MAX_CONFIG_FILE_BYTES), not read within
///   [`CONFIG_READ_TIMEOUT`](smdebug_io::sagemaker::CONFIG_READ_TIMEOUT)) is logged and
///   the last good configuration kept; no read waits on a FIFO.
///
/// Each of these is also kept, once, in [`problems`](Self::problems), for the job's summary.
///
/// ```
/// use smdebug_profiler::config::ProfilerConfigWatcher;
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("profilerconfig.json");
/// let mut watcher = ProfilerConfigWatcher::start(&path)?;
/// assert!(watcher.current().is_none() && watcher.poll().is_none());
/// std::fs::write(&path, r#"{"ProfilingParameters": {"DetailedProfilingConfig": "{\"NumSteps\": 2}"}}"#)?;
/// let config = watcher.poll().expect("the new file is read");
/// assert!(config.profiling_parameters.unwrap().detailed.is_some());
/// assert!(watcher.poll().is_none(), "nothing new");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct ProfilerConfigWatcher {
    path: PathBuf,
    /// The stamp when last read; `None` when the file was absent.
    stamp: Option<FileStamp>,
    read_at: SystemTime,
    /// The content last read, good or broken, so that one content is parsed (and logged) once.
    seen: Option<String>,
    current: Option<ProfilerConfig>,
    /// A stat error was logged and has not cleared yet.
    stat_failing: bool,
    /// What was logged, each distinct message once (at most [`Self::MAX_PROBLEMS`]).
    problems: Vec<String>,
}

impl ProfilerConfigWatcher {
    /// Starts watching the file at `path`, reading it now: a file that exists and does not
    /// parse is an error here (at start), naming the file, the key and the value. A missing
    /// file is no error: [`current`](Self::current) is `None` until it appears.
    pub fn start(path: impl Into<PathBuf>) -> Result<ProfilerConfigWatcher, ProfilerError> {
        let path = path.into();
        let read_at = SystemTime::now();
        let stamp = FileStamp::of(&path).map_err(|source| {
            ProfilerError::Storage(smdebug_io::Error::UnreadableConfigFile {
                path: path.display().to_string(),
                source,
            })
        })?;
        let seen = read_config_file(&path)?;
        let current = match &seen {
            Some(text) => Some(ProfilerConfig::from_json_in(text, &path)?),
            None => None,
        };
        Ok(ProfilerConfigWatcher {
            path,
            stamp,
            read_at,
            seen,
            current,
            stat_failing: false,
            problems: Vec::new(),
        })
    }

    /// Starts watching the file `sources` names (see [`start`](Self::start)).
    pub fn from_sources(sources: &ConfigSources) -> Result<ProfilerConfigWatcher, ProfilerError> {
        ProfilerConfigWatcher::start(sources.profiler_config_path())
    }

    /// The file watched.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The configuration in force: the last one that parsed (`None` while no file has been
    /// read).
    pub fn current(&self) -> Option<&ProfilerConfig> {
        self.current.as_ref()
    }

    /// The most distinct problems kept; later ones are logged only.
    pub const MAX_PROBLEMS: usize = 16;

    /// What went wrong with the file while it was watched (a broken edit, a FIFO or a device
    /// in its place, a file over the size limit, a failed stat, the file gone: each time, the
    /// last good configuration stayed in force), and the keys an edit brought that were not
    /// applied (the file as first read says its own at start); each distinct message once,
    /// oldest first.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    fn note(&mut self, text: String) {
        if !self.problems.contains(&text) && self.problems.len() < Self::MAX_PROBLEMS {
            self.problems.push(text);
        }
    }

    /// Looks at the file: the new configuration when it changed to one that parses and says
    /// something else than the one in force, `None` otherwise.
    pub fn poll(&mut self) -> Option<ProfilerConfig> {
        let stamp = match FileStamp::of(&self.path) {
            Ok(stamp) => {
                self.stat_failing = false;
                stamp
            }
            Err(e) => {
                if !self.stat_failing {
                    let text = format!(
                        "cannot stat the profiler configuration {}: {e}; keeping the last one",
                        self.path.display()
                    );
                    log::error!("{text}");
                    self.note(text);
                    self.stat_failing = true;
                }
                return None;
            }
        };
        let Some(stamp) = stamp else {
            if self.stamp.take().is_some() {
                let text = format!(
                    "the profiler configuration {} is gone; the last one read stays in force",
                    self.path.display()
                );
                log::warn!("{text}");
                self.note(text);
            }
            return None;
        };
        if self.stamp == Some(stamp) && !stamp.may_change_unseen(self.read_at) {
            return None;
        }
        let read_at = SystemTime::now();
        let text = match read_config_file(&self.path) {
            Ok(Some(text)) => text,
            // Removed between the stat and the read: the next poll sees it gone.
            Ok(None) => return None,
            Err(e) => {
                if self.stamp != Some(stamp) {
                    let text = format!("{e}; keeping the last good profiler configuration");
                    log::error!("{text}");
                    self.note(text);
                }
                self.stamp = Some(stamp);
                self.read_at = read_at;
                return None;
            }
        };
        self.stamp = Some(stamp);
        self.read_at = read_at;
        if self.seen.as_deref() == Some(text.as_str()) {
            return None;
        }
        let parsed = ProfilerConfig::from_json_in(&text, &self.path);
        self.seen = Some(text);
        match parsed {
            Ok(config) if self.current.as_ref() == Some(&config) => None,
            Ok(config) => {
                log::info!(
                    "the profiler configuration {} changed; applying it",
                    self.path.display()
                );
                // A key the edit brought that is not applied is said, as at start.
                let known: Vec<&UnappliedKey> = self
                    .current
                    .as_ref()
                    .map(|c| c.unapplied_keys().collect())
                    .unwrap_or_default();
                let new: Vec<String> = config
                    .unapplied_keys()
                    .filter(|k| !known.contains(k))
                    .map(|k| format!("{}: {k}", self.path.display()))
                    .collect();
                for text in new {
                    log::warn!("{text}");
                    self.note(text);
                }
                self.current = Some(config.clone());
                Some(config)
            }
            Err(e) => {
                let text = format!("{e}; keeping the last good profiler configuration");
                log::error!("{text}");
                self.note(text);
                None
            }
        }
    }
}
