//! Whether a location may take a new run, replacing a run, and claiming a run for a job.
//!
//! A person names the folder (or object-store prefix) a job writes into; it may be a project
//! folder, a home folder, or a SageMaker `LocalPath` naming some other folder. So:
//!
//! - **What a run owns** is [`layout::RUN_FOLDERS`] and [`layout::RUN_FILES`] at its top (and
//!   the hidden temporary files of an interrupted write of one of those files): nothing else.
//! - A location is [`FolderState::Empty`] (missing, or a folder with nothing in it),
//!   [`FolderState::Run`] (only what a run owns, made only of folders and regular files), or
//!   [`FolderState::Foreign`]: anything else at its top, or a symbolic link, FIFO, socket or
//!   device anywhere in the run's folders (the project never writes one). Nothing is followed
//!   out of the folder: entries are looked at with `lstat`.
//! - A new job starts only in an empty location or one holding only a run. [`clear`] deletes
//!   exactly the files and folders [`inspect`] found to be the run's; a foreign location is
//!   never cleared.
//! - [`claim`] is what a session does at start: rank 0 judges the location (refuses a foreign
//!   one; refuses one holding a run unless told to replace it, and always when a process of
//!   it still writes), clears it when told, and writes its identity (see [`crate::jobs`]);
//!   ranks > 0 write nothing until rank 0 of their job has claimed the run.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::jobs::{self, JobClaim, Liveness};
use smdebug_format::jobs::JobIdentity;
use smdebug_format::layout::{self, INDEX_DIR, RUN_FILES, RUN_FOLDERS, parse_index_file};
use smdebug_storage::Storage;

pub(crate) mod refusal;

pub use refusal::{Foreign, Refusal, RunExtent};

/// At most this many foreign entries are named in a refusal.
const NAMED_ENTRIES: usize = 5;

/// What a location holds (see the [module docs](self)).
#[derive(Clone, Debug, PartialEq)]
pub enum FolderState {
    /// Nothing: the folder (or prefix) is missing or empty.
    Empty,
    /// Only a run.
    Run(RunExtent),
    /// Something that is not a run's.
    Foreign(Foreign),
}

/// A top-level name the run owns as a file: one of [`RUN_FILES`], a start probe left behind
/// (`.smdebug-probe-worker_0-4242.tmp`), or the hidden temporary file of a write of one, in
/// flight or interrupted (`.training_job_end_ts.<pid>-<n>.tmp`,
/// `._smdebug-probe-worker_1-4243_tmp.4243-0.tmp`: another worker of the job probing the
/// location while this one looks at it).
fn owned_top_file(name: &str) -> bool {
    if RUN_FILES.contains(&name) || layout::is_start_probe_file(name) {
        return true;
    }
    let Some(stem) = name
        .strip_prefix('.')
        .and_then(|n| n.strip_suffix(".tmp"))
        .and_then(|n| n.rsplit_once('.'))
        .map(|(stem, _)| stem)
    else {
        return false;
    };
    let probe_prefix = layout::START_PROBE_PREFIX.replace('.', "_");
    let probe = stem
        .strip_prefix(probe_prefix.as_str())
        .and_then(|n| n.strip_suffix("_tmp"))
        .is_some_and(|n| !n.is_empty() && !n.contains('/'));
    probe || RUN_FILES.iter().any(|f| f.replace('.', "_") == stem)
}

/// What an entry that is not a folder or regular file is.
fn kind(ft: &fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO";
        }
        if ft.is_socket() {
            return "a socket";
        }
        if ft.is_char_device() || ft.is_block_device() {
            return "a device";
        }
    }
    if ft.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

/// Collects what a local folder holds, without following any link.
struct LocalScan {
    files: Vec<String>,
    dirs: Vec<String>,
    foreign: Vec<String>,
}

impl LocalScan {
    fn foreign(&mut self, rel: String) {
        self.foreign.push(rel);
    }

    fn entries(dir: &Path) -> io::Result<Option<fs::ReadDir>> {
        match fs::read_dir(dir) {
            Ok(r) => Ok(Some(r)),
            // Removed meanwhile (rank 0 clearing while another rank looks): nothing there.
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn walk_owned(&mut self, dir: &Path, rel: &str) -> io::Result<()> {
        let Some(entries) = Self::entries(dir)? else {
            return Ok(());
        };
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let child = format!("{rel}/{name}");
            let ft = match entry.file_type() {
                Ok(ft) => ft,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            if ft.is_dir() {
                self.walk_owned(&entry.path(), &child)?;
                self.dirs.push(child);
            } else if ft.is_file() {
                self.files.push(child);
            } else {
                self.foreign(format!("{child} ({})", kind(&ft)));
            }
        }
        Ok(())
    }

    fn scan(root: &Path) -> io::Result<LocalScan> {
        let mut scan = LocalScan {
            files: Vec::new(),
            dirs: Vec::new(),
            foreign: Vec::new(),
        };
        let Some(entries) = Self::entries(root)? else {
            return Ok(scan);
        };
        for entry in entries {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else {
                let lossy = entry.file_name().to_string_lossy().into_owned();
                scan.foreign(format!("{lossy} (a name that is not UTF-8)"));
                continue;
            };
            let ft = match entry.file_type() {
                Ok(ft) => ft,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            if ft.is_dir() && RUN_FOLDERS.contains(&name.as_str()) {
                scan.walk_owned(&entry.path(), &name)?;
                scan.dirs.push(name);
            } else if ft.is_file() && owned_top_file(&name) {
                scan.files.push(name);
            } else if ft.is_dir() {
                scan.foreign(format!("{name}/"));
            } else if ft.is_file() {
                scan.foreign(name);
            } else {
                scan.foreign(format!("{name} ({})", kind(&ft)));
            }
        }
        Ok(scan)
    }
}

/// What `storage`'s location holds (see the [module docs](self)). On local disk the folder is
/// walked without following links; on an object store every key under the prefix is listed.
pub fn inspect(storage: &dyn Storage) -> Result<FolderState> {
    let (mut files, mut dirs, mut foreign) = match storage.local_root() {
        Some(root) => {
            if fs::symlink_metadata(root).is_ok_and(|m| !m.is_dir() && !m.file_type().is_symlink())
            {
                return Err(smdebug_storage::Error::InvalidLocation {
                    location: root.display().to_string(),
                    reason: "a file, not a folder".into(),
                }
                .into());
            }
            let scan = LocalScan::scan(root).map_err(|e| smdebug_storage::Error::Failed {
                location: storage.describe().to_string(),
                op: "look into",
                path: String::new(),
                source: Box::new(e),
            })?;
            (scan.files, scan.dirs, scan.foreign)
        }
        None => {
            let keys = storage.list("")?;
            let (owned, foreign): (Vec<String>, Vec<String>) =
                keys.into_iter().partition(|k| layout::run_owns(k));
            (owned, Vec::new(), foreign)
        }
    };
    if !foreign.is_empty() {
        foreign.sort();
        let count = foreign.len();
        foreign.truncate(NAMED_ENTRIES);
        return Ok(FolderState::Foreign(Foreign {
            entries: foreign,
            count,
        }));
    }
    if files.is_empty() {
        // Nothing, or only the run's empty folders: nothing to keep or to continue.
        return Ok(FolderState::Empty);
    }
    let mut extent = RunExtent {
        ended: files.iter().any(|f| f == layout::END_MARKER),
        files: files.len(),
        ..RunExtent::default()
    };
    let mut steps = BTreeSet::new();
    for f in &files {
        if f.starts_with(INDEX_DIR)
            && let Some((step, worker)) = parse_index_file(f)
        {
            steps.insert(step);
            extent.workers.insert(worker);
        }
    }
    extent.step_count = steps.len();
    extent.steps = steps.first().copied().zip(steps.last().copied());
    // Unreadable identity files do not make the folder foreign: they are the run's.
    extent.jobs = jobs::read_jobs(storage).map(|(j, _)| j).unwrap_or_default();
    files.sort();
    // Deepest folders first: a folder is removed once what it held is.
    dirs.sort_by_key(|d| std::cmp::Reverse(d.matches('/').count()));
    extent.paths = files
        .drain(..)
        .map(|f| (f, false))
        .chain(dirs.drain(..).map(|d| (d, true)))
        .collect();
    Ok(FolderState::Run(extent))
}

/// Deletes the run `inspect` found in `storage`: exactly its files and folders, never a
/// folder that holds something else by now (a folder that is not empty once the run's files
/// are gone is an error, and is left as it is). On local disk nothing is followed on the way
/// to what is deleted: a link put in place of one of the run's folders since `inspect` makes
/// the deletion fail instead of reaching out of the run. Returns how many files were deleted.
pub fn clear(storage: &dyn Storage, extent: &RunExtent) -> Result<usize> {
    let failed = |path: &str, op: &'static str, e: io::Error| {
        Error::from(smdebug_storage::Error::Failed {
            location: storage.describe().to_string(),
            op,
            path: path.to_string(),
            source: Box::new(e),
        })
    };
    let Some(root) = storage.local_root() else {
        for (path, _) in &extent.paths {
            storage.delete(path)?;
        }
        return Ok(extent.paths.len());
    };
    let beneath = Beneath::open(root).map_err(|e| failed("", "open the run's folder", e))?;
    let mut deleted = 0;
    for (path, is_dir) in &extent.paths {
        let op = if *is_dir {
            "remove the run's folder"
        } else {
            "delete the run's file"
        };
        match beneath.remove(root, path, *is_dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(failed(path, op, e)),
        }
        deleted += usize::from(!*is_dir);
    }
    Ok(deleted)
}

/// Removing entries beneath the run's folder. On Linux the folder holding each entry is
/// opened from the run's folder with no link resolved (`openat2` with `RESOLVE_BENEATH` and
/// `RESOLVE_NO_SYMLINKS`) and the entry removed there (`unlinkat`), so no link on the way is
/// ever followed; elsewhere (or on a kernel without `openat2`) each folder on the way is
/// checked with `lstat` first.
struct Beneath {
    #[cfg(target_os = "linux")]
    root: rustix::fd::OwnedFd,
}

impl Beneath {
    #[cfg(target_os = "linux")]
    fn open(root: &Path) -> io::Result<Beneath> {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC;
        Ok(Beneath {
            root: rustix::fs::open(root, flags, Mode::empty())?,
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn open(_root: &Path) -> io::Result<Beneath> {
        Ok(Beneath {})
    }

    #[cfg(target_os = "linux")]
    fn remove(&self, root: &Path, rel: &str, dir: bool) -> io::Result<()> {
        use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags};
        let (parent, name) = rel.rsplit_once('/').unwrap_or(("", rel));
        let at = if dir {
            AtFlags::REMOVEDIR
        } else {
            AtFlags::empty()
        };
        if parent.is_empty() {
            return Ok(rustix::fs::unlinkat(&self.root, name, at)?);
        }
        let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        match rustix::fs::openat2(&self.root, parent, flags, Mode::empty(), resolve) {
            Ok(fd) => Ok(rustix::fs::unlinkat(&fd, name, at)?),
            Err(rustix::io::Errno::NOSYS) => remove_checked(root, rel, dir),
            Err(e) => Err(e.into()),
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn remove(&self, root: &Path, rel: &str, dir: bool) -> io::Result<()> {
        remove_checked(root, rel, dir)
    }
}

/// Removes `rel` under `root` after checking with `lstat` that no folder on the way is a link.
fn remove_checked(root: &Path, rel: &str, dir: bool) -> io::Result<()> {
    let mut at = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for part in &parts[..parts.len() - 1] {
        at.push(part);
        if !fs::symlink_metadata(&at)?.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a folder of the run: not followed", at.display()),
            ));
        }
    }
    let path = root.join(rel);
    if dir {
        fs::remove_dir(path)
    } else {
        fs::remove_file(path)
    }
}

/// What a session claims a run as.
#[derive(Clone, Debug)]
pub struct ClaimRequest {
    /// The worker name (`worker_0`).
    pub worker: String,
    /// Its rank.
    pub rank: usize,
    /// The job's number of workers.
    pub world_size: usize,
    /// The id the launcher gave every process of the job ([`jobs::shared_job_id`]); `None`:
    /// rank 0 makes one and the other ranks adopt it.
    pub job: Option<String>,
    /// Replace a run that is there (rank 0 only), unless one of its processes still writes.
    pub overwrite: bool,
    /// How long a rank > 0 waits for rank 0 to claim the run.
    pub join_timeout: Duration,
    /// How often it looks.
    pub join_poll: Duration,
}

impl ClaimRequest {
    /// A request for rank `rank` of `world_size`, with the job id from the environment, not
    /// replacing, joining within 2 minutes.
    pub fn new(rank: usize, world_size: usize) -> ClaimRequest {
        ClaimRequest {
            worker: layout::worker_name(rank),
            rank,
            world_size,
            job: jobs::shared_job_id(|v| std::env::var(v).ok()),
            overwrite: false,
            join_timeout: Duration::from_secs(120),
            join_poll: Duration::from_millis(50),
        }
    }
}

/// How long before its own start a rank > 0 takes rank 0's claim to be its job's when the
/// launcher names no job.
pub const JOIN_WINDOW: Duration = Duration::from_secs(60);

fn refused(storage: &dyn Storage, refusal: Refusal) -> Error {
    Error::Refused {
        location: storage.describe().to_string(),
        refusal: Box::new(refusal),
    }
}

fn in_use(storage: &dyn Storage, writer: &JobIdentity) -> Error {
    refused(
        storage,
        Refusal::InUse {
            writer: writer.describe(),
            seconds_ago: (jobs::now_s() - writer.heartbeat).max(0.0),
        },
    )
}

/// Claims the run at `storage` for a session (see the [module docs](self)): returns its
/// identity, kept beating until the claim is finished. What it found and did is logged.
///
/// Rank 0: a foreign location is refused; a run there is refused while any of its processes
/// is live, else replaced when `overwrite` (its own files only, see [`clear`]) and refused
/// otherwise ([`Refusal::Ended`], [`Refusal::Unfinished`] naming its extent). Ranks > 0: a
/// foreign location is refused; then they wait for rank 0's identity of the same job (the
/// launcher's id, or without one rank 0's live claim started at most [`JOIN_WINDOW`] before
/// their own start), and adopt its job id. Every rank: a live process of its own worker is a
/// second writer and refused, checked again after its identity is written (two starting at
/// once both see each other, and both stop).
pub fn claim(storage: Arc<dyn Storage>, request: &ClaimRequest) -> Result<JobClaim> {
    let started = jobs::now_s();
    let state = inspect(storage.as_ref())?;
    if let FolderState::Foreign(foreign) = state {
        return Err(refused(storage.as_ref(), Refusal::Foreign(foreign)));
    }
    let job = if request.rank == 0 {
        if let FolderState::Run(extent) = state {
            if let Some(writer) = extent.live_writers().first() {
                return Err(in_use(storage.as_ref(), writer));
            }
            let identities_only = extent
                .paths
                .iter()
                .all(|(p, dir)| *dir || layout::parse_job_file(p).is_some());
            if !request.overwrite && !identities_only {
                let refusal = if extent.ended {
                    Refusal::Ended(extent)
                } else {
                    Refusal::Unfinished(extent)
                };
                return Err(refused(storage.as_ref(), refusal));
            }
            // A job that stopped before writing anything left only its identity files: they
            // go without asking.
            let n = clear(storage.as_ref(), &extent)?;
            log::info!(
                "smdebug: replaced the run at {} ({extent}): {n} files deleted",
                storage.describe()
            );
        }
        request.job.clone().unwrap_or_else(jobs::random_id)
    } else {
        wait_for_chief(storage.as_ref(), request, started)?
    };
    let rival = |jobs: &[JobIdentity], me: Option<&str>| -> Option<JobIdentity> {
        let now = jobs::now_s();
        jobs.iter()
            .find(|j| {
                j.worker == request.worker && Some(j.process.as_str()) != me && j.is_live(now)
            })
            .cloned()
    };
    if let Some(r) = rival(&jobs::read_jobs(storage.as_ref())?.0, None) {
        return Err(in_use(storage.as_ref(), &r));
    }
    let mut identity = jobs::identity_here(
        job,
        request.worker.clone(),
        request.rank,
        request.world_size,
    );
    identity.started = started;
    let process = identity.process.clone();
    let claim = JobClaim::start(storage.clone(), identity)?;
    match jobs::read_jobs(storage.as_ref()) {
        Ok((found, _)) => {
            if let Some(r) = rival(&found, Some(&process)) {
                claim.withdraw();
                return Err(in_use(storage.as_ref(), &r));
            }
        }
        Err(e) => {
            claim.withdraw();
            return Err(e);
        }
    }
    Ok(claim)
}

/// A rank > 0: waits until rank 0 of its job has claimed the run, and returns the job's id.
fn wait_for_chief(storage: &dyn Storage, request: &ClaimRequest, started: f64) -> Result<String> {
    let chief = layout::worker_name(0);
    let deadline = Instant::now() + request.join_timeout;
    loop {
        let (found, _) = jobs::read_jobs(storage)?;
        let now = jobs::now_s();
        let mine = found
            .iter()
            .filter(|j| j.worker == chief && j.is_live(now))
            .filter(|j| match &request.job {
                Some(job) => &j.job == job,
                None => j.started >= started - JOIN_WINDOW.as_secs_f64(),
            })
            .max_by(|a, b| a.started.total_cmp(&b.started));
        if let Some(chief) = mine {
            return Ok(chief.job.clone());
        }
        if Instant::now() >= deadline {
            return Err(refused(
                storage,
                Refusal::NoChief {
                    worker: request.worker.clone(),
                    job: request.job.clone(),
                    waited: request.join_timeout,
                },
            ));
        }
        std::thread::sleep(request.join_poll);
    }
}

/// Whether `storage` takes writes: a small hidden object is stored and removed again. A
/// missing bucket, denied credentials, a read-only or full disk, an unreachable store: the
/// storage's own error, before anything that writes the run starts. `name` makes the object's
/// key this writer's own (`worker_0`). Removing it is best effort (a store may allow writes
/// and not deletes); the key is hidden from local listings either way.
pub fn probe_write(storage: &dyn Storage, name: &str) -> Result<()> {
    // A name the run owns: a probe left behind never makes the folder look foreign.
    let key = smdebug_format::layout::start_probe_file(name, std::process::id());
    storage.put(&key, bytes::Bytes::from_static(b"smdebug write probe\n"))?;
    if let Err(e) = storage.delete(&key) {
        log::warn!("smdebug: the write probe `{key}` could not be removed: {e}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_files_of_the_runs_own_files_are_the_runs() {
        assert!(owned_top_file("training_job_end.ts"));
        assert!(owned_top_file(".training_job_end_ts.4242-0.tmp"));
        assert!(owned_top_file(".stop_request_json.1-3.tmp"));
        assert!(owned_top_file(".smdebug-serve-write-check"));
        assert!(owned_top_file(".smdebug-probe-worker_0-4242.tmp"));
        // A probe's own write in flight (what LocalStorage's `put` names its temporary file).
        assert!(owned_top_file(
            "._smdebug-probe-worker_1-13939_tmp.13939-0.tmp"
        ));
        assert!(!owned_top_file("._smdebug-probe-_tmp.13939-0.tmp"));
        assert!(!owned_top_file("._notes_tmp.13939-0.tmp"));
        assert!(layout::run_owns(".smdebug-probe-worker_3-1.tmp"));
        assert!(!owned_top_file(".smdebug-probe-.tmp"));
        assert!(!owned_top_file(".bashrc"));
        assert!(!owned_top_file(".notes_txt.1-2.tmp"));
        assert!(!owned_top_file("README.md"));
    }
}
