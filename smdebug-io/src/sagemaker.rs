//! SageMaker's configuration files: where they are, reading them, and noticing when one changes.
//!
//! A SageMaker training job gets two JSON files from the platform, and Python smdebug 1.0.34
//! reads them without a change to the training code:
//!
//! | file | variable | default |
//! | --- | --- | --- |
//! | the hook config (`DebugHookConfig`) | `SMDEBUG_CONFIG_FILE_PATH` | `/opt/ml/input/config/debughookconfig.json` |
//! | the profiler config (`ProfilerConfig`) | `SMPROFILER_CONFIG_PATH` | `/opt/ml/input/config/profilerconfig.json` |
//!
//! [`ConfigSources`] says where they are (from the environment, or given, so tests never touch
//! the process environment). [`HookConfigFile`] reads the hook config into smdebug-core's
//! [`HookConfig`] (see [`smdebug_core::config`] for the keys); the profiler config is read by
//! smdebug-profiler's `config` module, with [`read_config_file`] and [`FileStamp`] from here.
//!
//! A missing file is `Ok(None)`: the code's settings stand. A file that exists and cannot be
//! read or does not parse is an error naming the file, the key and the value, at start.
//!
//! ```
//! use smdebug_core::{HookConfig, Mode, SaveConfig};
//! use smdebug_io::sagemaker::ConfigSources;
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("debughookconfig.json");
//! std::fs::write(&path, r#"{"HookParameters": {"train.save_interval": "25"}}"#)?;
//! let sources = ConfigSources::from_vars(|var| match var {
//!     "SMDEBUG_CONFIG_FILE_PATH" => Some(path.display().to_string()),
//!     _ => None,
//! });
//! let code = HookConfig { save_config: SaveConfig::every(100), ..HookConfig::default() };
//! let config = match sources.load_hook_config()? {
//!     Some(file) => file.over(code)?,   // the file's settings over the code's
//!     None => code,                     // no file: the code's settings
//! };
//! assert!(config.save_config.should_save(Mode::Train, 25));
//! assert!(config.save_config.should_save(Mode::Eval, 100) && !config.save_config.should_save(Mode::Eval, 25));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use smdebug_core::HookConfig;
use smdebug_core::config_keys::UnappliedKey;

use crate::error::{Error, Result};

/// The variable naming the hook-config file (smdebug's `CONFIG_FILE_PATH_ENV_STR`).
pub const HOOK_CONFIG_ENV: &str = "SMDEBUG_CONFIG_FILE_PATH";
/// Where SageMaker puts the hook-config file.
pub const DEFAULT_HOOK_CONFIG_PATH: &str = "/opt/ml/input/config/debughookconfig.json";
/// The variable naming the profiler-config file.
pub const PROFILER_CONFIG_ENV: &str = "SMPROFILER_CONFIG_PATH";
/// Where SageMaker puts the profiler-config file.
pub const DEFAULT_PROFILER_CONFIG_PATH: &str = "/opt/ml/input/config/profilerconfig.json";
/// Where smdebug writes tensors on SageMaker when the hook config has no `LocalPath`.
pub const DEFAULT_SAGEMAKER_TENSORS_DIR: &str = "/opt/ml/output/tensors";
/// Where smdebug writes profiler files on SageMaker when `ProfilingParameters` has no
/// `LocalPath`.
pub const DEFAULT_SAGEMAKER_PROFILER_DIR: &str = "/opt/ml/output/profiler";

/// Where SageMaker's two configuration files are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigSources {
    hook_config: PathBuf,
    profiler_config: PathBuf,
}

impl Default for ConfigSources {
    /// SageMaker's paths: [`DEFAULT_HOOK_CONFIG_PATH`] and [`DEFAULT_PROFILER_CONFIG_PATH`].
    fn default() -> Self {
        ConfigSources::new(DEFAULT_HOOK_CONFIG_PATH, DEFAULT_PROFILER_CONFIG_PATH)
    }
}

impl ConfigSources {
    /// The two files at these paths.
    pub fn new(hook_config: impl Into<PathBuf>, profiler_config: impl Into<PathBuf>) -> Self {
        ConfigSources {
            hook_config: hook_config.into(),
            profiler_config: profiler_config.into(),
        }
    }

    /// The paths the process environment names (`SMDEBUG_CONFIG_FILE_PATH`,
    /// `SMPROFILER_CONFIG_PATH`), SageMaker's defaults for those it does not.
    pub fn from_env() -> Self {
        ConfigSources::from_vars(|var| std::env::var(var).ok())
    }

    /// As [`from_env`](Self::from_env), with the variables looked up by `var` (for tests, or
    /// a launcher's own environment). A variable set to an empty string counts as unset.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        let path = |name: &str, default: &str| {
            var(name)
                .filter(|v| !v.trim().is_empty())
                .map_or_else(|| PathBuf::from(default), PathBuf::from)
        };
        ConfigSources {
            hook_config: path(HOOK_CONFIG_ENV, DEFAULT_HOOK_CONFIG_PATH),
            profiler_config: path(PROFILER_CONFIG_ENV, DEFAULT_PROFILER_CONFIG_PATH),
        }
    }

    /// The hook-config file's path.
    pub fn hook_config_path(&self) -> &Path {
        &self.hook_config
    }

    /// The profiler-config file's path.
    pub fn profiler_config_path(&self) -> &Path {
        &self.profiler_config
    }

    /// Reads and parses the hook-config file: `Ok(None)` when it does not exist; an error
    /// naming the file, the key and the value when it cannot be read or does not parse.
    pub fn load_hook_config(&self) -> Result<Option<HookConfigFile>> {
        HookConfigFile::read(&self.hook_config)
    }
}

/// A hook-config file, read and checked: [`config`](Self::config) is what Python smdebug
/// would make of it over its defaults, [`over`](Self::over) lays it over a configuration from
/// code (what the file states replaces what the code set; see [`smdebug_core::config`]).
#[derive(Clone, Debug)]
pub struct HookConfigFile {
    path: PathBuf,
    text: String,
    config: HookConfig,
    unapplied: Vec<UnappliedKey>,
}

impl HookConfigFile {
    /// Reads the file at `path`: `Ok(None)` when it does not exist.
    pub fn read(path: &Path) -> Result<Option<HookConfigFile>> {
        match read_config_file(path)? {
            None => Ok(None),
            Some(text) => HookConfigFile::parse(path, text).map(Some),
        }
    }

    /// Checks `text`, the content of the file at `path` (named in errors).
    pub fn parse(path: &Path, text: String) -> Result<HookConfigFile> {
        let (config, unapplied) = HookConfig::default()
            .with_smdebug_json_checked(&text)
            .map_err(|source| bad(path, source))?;
        Ok(HookConfigFile {
            path: path.to_path_buf(),
            text,
            config,
            unapplied,
        })
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's keys that were not applied: SageMaker's that are not supported here, and
    /// unknown ones (a misspelling, with the key it most resembles).
    pub fn unapplied_keys(&self) -> &[UnappliedKey] {
        &self.unapplied
    }

    /// The file over [`HookConfig::default`].
    pub fn config(&self) -> &HookConfig {
        &self.config
    }

    /// The file over `code`: what it states replaces what `code` has. It can still fail where
    /// the two combine badly (a file's `end_step` before the code's `start_step`); the error
    /// names the file.
    pub fn over(&self, code: HookConfig) -> Result<HookConfig> {
        code.with_smdebug_json(&self.text)
            .map_err(|source| bad(&self.path, source))
    }
}

fn bad(path: &Path, source: smdebug_core::Error) -> Error {
    Error::BadConfigFile {
        path: path.display().to_string(),
        source,
    }
}

/// The largest configuration file read: a bigger one is refused, naming its size, before a
/// byte of it is read. SageMaker's files are a few kilobytes; this leaves room for a hook
/// config listing millions of `save_steps` (3 million steps take 23 MB).
pub const MAX_CONFIG_FILE_BYTES: u64 = 64 << 20;

/// How long opening and reading one configuration file may take (a file on a network file
/// system that stopped answering): past it the read is an error and the reading thread is left
/// to finish on its own.
pub const CONFIG_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The content of a configuration file as text: `Ok(None)` when it does not exist, an error
/// naming the file when it exists and cannot be read (a directory, no permission, not UTF-8),
/// is not a regular file (a FIFO, `/dev/zero`: refused before a byte is read, never waited
/// on), is over [`MAX_CONFIG_FILE_BYTES`], or takes more than [`CONFIG_READ_TIMEOUT`].
pub fn read_config_file(path: &Path) -> Result<Option<String>> {
    read_config_file_within(path, MAX_CONFIG_FILE_BYTES, CONFIG_READ_TIMEOUT)
}

/// [`read_config_file`] with another size limit and timeout.
pub fn read_config_file_within(
    path: &Path,
    max_bytes: u64,
    timeout: Duration,
) -> Result<Option<String>> {
    let unreadable = |source: io::Error| Error::UnreadableConfigFile {
        path: path.display().to_string(),
        source,
    };
    // The open and the read on a thread of their own, so that no file system can hold the
    // caller (a training job's start, the profiler-config follower) past the timeout.
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let owned = path.to_path_buf();
    std::thread::Builder::new()
        .name("smdebug-config-read".into())
        .spawn(move || {
            let _ = tx.send(read_bounded(&owned, max_bytes));
        })
        .map_err(unreadable)?;
    let bytes = match rx.recv_timeout(timeout) {
        Ok(Ok(Some(bytes))) => bytes,
        Ok(Ok(None)) => return Ok(None),
        Ok(Err(e)) => return Err(unreadable(e)),
        Err(_) => {
            return Err(unreadable(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("not read within {} s", timeout.as_secs_f64()),
            )));
        }
    };
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|e| unreadable(io::Error::new(io::ErrorKind::InvalidData, e)))
}

/// Opens `path` without waiting (a FIFO's open would wait for a writer), refuses what is not a
/// regular file or is over `max_bytes`, and reads at most `max_bytes + 1` bytes (a file that
/// grows while read is refused too).
fn read_bounded(path: &Path, max_bytes: u64) -> io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(
            (rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY).bits() as i32,
        );
    }
    let file = match options.open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{}, not a regular file: not read",
                smdebug_storage::regular::kind_of(&meta.file_type())
            ),
        ));
    }
    let too_big = |what: String| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{what}, more than the {max_bytes} bytes a configuration file may have"),
        )
    };
    if meta.len() > max_bytes {
        return Err(too_big(format!("{} bytes", meta.len())));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max_bytes + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_big("it grew while read".to_string()));
    }
    Ok(Some(bytes))
}

/// What one `stat` says about a file, to tell cheaply whether it may have changed: its
/// modification time, length and (on Unix) inode and change time. A file replaced by renaming
/// another over it has a new inode; one rewritten in place has a new modification time, unless
/// the rewrite falls within the file system's timestamp granularity (see
/// [`FileStamp::may_change_unseen`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
    changed_ns: i128,
}

impl FileStamp {
    /// The stamp of the file at `path`: `Ok(None)` when it does not exist.
    pub fn of(path: &Path) -> io::Result<Option<FileStamp>> {
        match std::fs::metadata(path) {
            Ok(meta) => Ok(Some(FileStamp::from_metadata(&meta))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn from_metadata(meta: &std::fs::Metadata) -> FileStamp {
        #[cfg(unix)]
        let (inode, changed_ns) = {
            use std::os::unix::fs::MetadataExt;
            (
                meta.ino(),
                i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
            )
        };
        #[cfg(not(unix))]
        let (inode, changed_ns) = (0, 0);
        FileStamp {
            modified: meta.modified().ok(),
            len: meta.len(),
            inode,
            changed_ns,
        }
    }

    /// Whether the file may have been rewritten since a read at `read_at` without its stamp
    /// changing: its modification time is within [`FileStamp::GRANULARITY`] of the read (or
    /// unknown), so a write in the same clock tick would leave the same stamp. A watcher
    /// compares the content again in that case ("racily clean", as git calls it).
    pub fn may_change_unseen(&self, read_at: SystemTime) -> bool {
        match self.modified {
            Some(m) => m + FileStamp::GRANULARITY >= read_at,
            None => true,
        }
    }

    /// The coarsest timestamp granularity of common file systems (FAT's 2 s; ext4 and XFS
    /// keep nanoseconds, but take them from a clock that ticks every few milliseconds).
    pub const GRANULARITY: std::time::Duration = std::time::Duration::from_secs(2);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn sources_come_from_the_variables_or_sagemakers_defaults() {
        let s = ConfigSources::from_vars(vars(&[
            ("SMDEBUG_CONFIG_FILE_PATH", "/a/hook.json"),
            ("SMPROFILER_CONFIG_PATH", ""),
        ]));
        assert_eq!(s.hook_config_path(), Path::new("/a/hook.json"));
        assert_eq!(
            s.profiler_config_path(),
            Path::new(DEFAULT_PROFILER_CONFIG_PATH),
            "an empty variable counts as unset"
        );
        assert_eq!(ConfigSources::from_vars(|_| None), ConfigSources::default());
    }

    #[test]
    fn a_missing_file_is_none_and_a_directory_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            read_config_file(&dir.path().join("absent.json"))
                .unwrap()
                .is_none()
        );
        assert!(
            FileStamp::of(&dir.path().join("absent.json"))
                .unwrap()
                .is_none()
        );
        let err = read_config_file(dir.path()).unwrap_err().to_string();
        assert!(err.contains(&dir.path().display().to_string()), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_or_a_device_is_refused_at_once_without_reading_it() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("hook.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // No writer ever opens the FIFO: a blocking open would wait forever.
        let started = std::time::Instant::now();
        let err = read_config_file(&fifo).unwrap_err().to_string();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert!(err.contains("a FIFO, not a regular file"), "{err}");
        assert!(err.contains(&fifo.display().to_string()), "{err}");
        // `/dev/zero` never ends: it is refused by its type before a byte is read.
        let err = read_config_file(Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/dev/zero") && err.contains("a character device"),
            "{err}"
        );
    }

    #[test]
    fn a_file_over_the_limit_is_refused_by_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("profilerconfig.json");
        // A sparse file a byte over the limit: refused from its size, nothing read.
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(MAX_CONFIG_FILE_BYTES + 1).unwrap();
        let err = read_config_file(&path).unwrap_err().to_string();
        assert!(
            err.contains(&format!("{} bytes", MAX_CONFIG_FILE_BYTES + 1))
                && err.contains(&format!("more than the {MAX_CONFIG_FILE_BYTES} bytes")),
            "{err}"
        );
        // At the limit it is read whole; a byte over a smaller limit is not.
        std::fs::write(&path, "{}").unwrap();
        assert_eq!(
            read_config_file_within(&path, 2, CONFIG_READ_TIMEOUT).unwrap(),
            Some("{}".to_string())
        );
        let err = read_config_file_within(&path, 1, CONFIG_READ_TIMEOUT).unwrap_err();
        assert!(
            err.to_string().contains("2 bytes, more than the 1 bytes"),
            "{err}"
        );
    }

    #[test]
    fn a_stamp_changes_when_a_file_is_renamed_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        std::fs::write(&path, "{}").unwrap();
        let before = FileStamp::of(&path).unwrap().unwrap();
        let tmp = dir.path().join("c.json.tmp");
        std::fs::write(&tmp, "{}").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        let after = FileStamp::of(&path).unwrap().unwrap();
        assert_ne!(before, after, "same length, same second: the inode tells");
        assert!(after.may_change_unseen(SystemTime::now()));
    }
}
