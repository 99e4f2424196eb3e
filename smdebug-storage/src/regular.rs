//! Opening a run's file for reading: only regular files inside the run, and never more bytes
//! than the file held when it was opened.
//!
//! A run's folder comes from other people and other tools. A FIFO in place of an index file
//! would block `open` forever; a device (`/dev/zero`) or a file that keeps growing would be
//! read until memory runs out; a symbolic link could hand out any file of the machine. So a
//! read first opens the path with no link followed at all (Linux's `openat2`, non-blocking, so
//! that a FIFO cannot block it) and refuses what is not a regular file before reading a byte.
//! When a link is on the way (or elsewhere than Linux) it checks each part of the path inside
//! the run without following links (`lstat`): a link is followed only when where it points is
//! inside the run, and what the path names in the end must be a regular file, checked before it
//! is opened (on that path a FIFO is never opened) and again on the open file.

use std::fs::{self, File};
use std::io;
use std::path::Path;

/// The most bytes one whole-file read takes (`Storage::get`): no file of a run that is read
/// whole (index, collections, system metrics, traces) comes near it.
pub(crate) const MAX_WHOLE_FILE_BYTES: u64 = 4 << 30;

fn refused(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, why)
}

/// What a file type is, in words for an error (`a FIFO`, `a directory`).
#[cfg(unix)]
pub fn kind_of(ft: &fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

#[cfg(not(unix))]
pub fn kind_of(ft: &fs::FileType) -> &'static str {
    if ft.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

/// Checks that `rel` (a relative path of plain names, already checked) under `root` names a
/// regular file inside the run, following links only to places inside it.
fn check(root: &Path, rel: &str) -> io::Result<()> {
    let mut path = root.to_path_buf();
    let mut last = None;
    for part in rel.split('/') {
        path.push(part);
        let meta = fs::symlink_metadata(&path)?;
        if meta.file_type().is_symlink() {
            // Where it points, with every link resolved, must be inside the run.
            let target = fs::canonicalize(&path)?;
            let inside = fs::canonicalize(root).is_ok_and(|r| target.starts_with(&r));
            if !inside {
                return Err(refused(format!(
                    "a symbolic link to {}, outside the run: not read",
                    target.display()
                )));
            }
            last = Some(fs::metadata(&path)?);
        } else {
            last = Some(meta);
        }
    }
    match last {
        Some(meta) if meta.is_file() => Ok(()),
        Some(meta) => Err(refused(format!(
            "{}, not a regular file: not read",
            kind_of(&meta.file_type())
        ))),
        None => Err(refused("an empty path".to_string())),
    }
}

/// Opens `rel` under `root` for reading, a regular file inside the run (see the module docs);
/// returns it and its size when opened.
pub fn open(root: &Path, rel: &str) -> io::Result<(File, u64)> {
    let file = match open_without_links(root, rel) {
        Some(file) => file,
        None => {
            check(root, rel)?;
            File::open(root.join(rel))?
        }
    };
    let meta = file.metadata()?;
    // Replaced between the check and the open.
    if !meta.is_file() {
        return Err(refused(format!(
            "{}, not a regular file: not read",
            kind_of(&meta.file_type())
        )));
    }
    Ok((file, meta.len()))
}

/// Linux: opens `root/rel` in one call when no part of the path is a symbolic link (`openat2`
/// with `RESOLVE_NO_SYMLINKS`), non-blocking so that a FIFO does not block the open (the caller
/// then refuses whatever is not a regular file, before reading a byte). A run has one small
/// file a step, so this saves the `lstat` of every part of every path. `None` when a link is on
/// the way (or the kernel has no `openat2`, or the open failed for another reason): the checked
/// path then decides and reports.
///
/// While the run's folder is held on this thread ([`HeldRoot`]), `rel` is looked up from the
/// held folder (`RESOLVE_BENEATH` as well: nothing outside it), not from `/` through every
/// part of `root` again.
#[cfg(target_os = "linux")]
fn open_without_links(root: &Path, rel: &str) -> Option<File> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let resolve = ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    let held = HELD.with_borrow(|held| {
        let (_, dir) = held.as_ref().filter(|(path, _)| path == root)?;
        Some(
            rustix::fs::openat2(
                dir,
                rel,
                flags,
                Mode::empty(),
                resolve | ResolveFlags::BENEATH,
            )
            .ok()
            .map(File::from),
        )
    });
    if let Some(opened) = held {
        return opened;
    }
    rustix::fs::openat2(
        rustix::fs::CWD,
        root.join(rel),
        flags,
        Mode::empty(),
        resolve,
    )
    .ok()
    .map(File::from)
}

#[cfg(target_os = "linux")]
thread_local! {
    /// The run folder held on this thread ([`HeldRoot`]): its path and an `O_PATH` descriptor.
    static HELD: std::cell::RefCell<Option<(std::path::PathBuf, rustix::fd::OwnedFd)>> =
        const { std::cell::RefCell::new(None) };
}

/// A run's folder held open on this thread while a batch of its files is read ([`open`] of
/// files under the same `root` on this thread): each file's path is then looked up from the
/// folder, not from `/` again (a long run's reader opens two small files a step). What is
/// read is the same: only regular files inside the run, no link followed (a path through one
/// goes the checked way, as before). Held for one batch (a few hundred files) and let go when
/// dropped, so that a run folder deleted or replaced meanwhile is looked up afresh by the next
/// batch. Where the folder cannot be opened (or off Linux) it does nothing.
pub struct HeldRoot {
    #[cfg(target_os = "linux")]
    held: bool,
}

impl HeldRoot {
    /// Holds `root` on this thread until the value is dropped (a hold already there, of
    /// another batch on this thread, is kept, and stays after this one).
    pub fn hold(root: &Path) -> HeldRoot {
        #[cfg(target_os = "linux")]
        {
            use rustix::fs::{Mode, OFlags};
            let held = HELD.with_borrow_mut(|slot| {
                if slot.is_some() {
                    return false;
                }
                let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
                match rustix::fs::open(root, flags, Mode::empty()) {
                    Ok(dir) => {
                        *slot = Some((root.to_path_buf(), dir));
                        true
                    }
                    Err(_) => false,
                }
            });
            HeldRoot { held }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = root;
            HeldRoot {}
        }
    }
}

impl Drop for HeldRoot {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if self.held {
            HELD.with_borrow_mut(|slot| *slot = None);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn open_without_links(_root: &Path, _rel: &str) -> Option<File> {
    None
}

/// The longest stretch [`read_range`] reads without asking the file's size first.
pub(crate) const DIRECT_RANGE_MAX: u64 = 16 << 20;

/// Bytes `range` of `rel` (a non-empty range), cut short where the file ends; an error when
/// the range starts at or past the end (see the module docs).
pub(crate) fn read_range(
    root: &Path,
    rel: &str,
    range: std::ops::Range<u64>,
) -> io::Result<Vec<u8>> {
    #[cfg(target_os = "linux")]
    if let Ok(len) = usize::try_from(range.end.saturating_sub(range.start))
        && len as u64 <= DIRECT_RANGE_MAX
        && let Some(file) = open_without_links(root, rel)
        && let Some(buf) = pread_range(&file, range.start, len)
    {
        return Ok(buf);
    }
    use std::io::Read;
    let (f, len) = open_range(root, rel, range)?;
    let mut buf = Vec::with_capacity(len as usize);
    f.take(len).read_to_end(&mut buf)?;
    Ok(buf)
}

/// `rel` opened (the checked way, [`open`]) and placed at `range.start`, with how many bytes
/// of `range` it holds; an error when the range starts at or past its end.
fn open_range(root: &Path, rel: &str, range: std::ops::Range<u64>) -> io::Result<(File, u64)> {
    use std::io::{Seek, SeekFrom};
    let (mut f, size) = open(root, rel)?;
    if range.start >= size {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("range {range:?} starts at or past the end ({size} bytes)"),
        ));
    }
    f.seek(SeekFrom::Start(range.start))?;
    Ok((f, range.end.min(size) - range.start))
}

/// [`read_range`] into `buf` (not empty): bytes `start..start + buf.len()` of `rel` written at
/// the start of `buf`, cut short where the file ends; how many. The same errors as
/// `read_range`.
pub(crate) fn read_range_into(
    root: &Path,
    rel: &str,
    start: u64,
    buf: &mut [u8],
) -> io::Result<usize> {
    #[cfg(target_os = "linux")]
    if buf.len() as u64 <= DIRECT_RANGE_MAX
        && let Some(file) = open_without_links(root, rel)
        && let Some(n) = pread_into(&file, start, buf)
    {
        return Ok(n);
    }
    use std::io::Read;
    let (f, len) = open_range(root, rel, start..start.saturating_add(buf.len() as u64))?;
    let len = len as usize;
    let mut f = f.take(len as u64);
    let mut n = 0;
    while n < len {
        match f.read(&mut buf[n..len]) {
            Ok(0) => break,
            Ok(read) => n += read,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// [`pread_range`] into `buf`: how many bytes were written at its start.
#[cfg(target_os = "linux")]
fn pread_into(file: &File, start: u64, buf: &mut [u8]) -> Option<usize> {
    let mut n = 0;
    while n < buf.len() {
        match rustix::io::pread(file, &mut buf[n..], start + n as u64) {
            Ok(0) => break,
            Ok(read) => n += read,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return None,
        }
    }
    (n > 0).then_some(n)
}

/// `len` bytes of `file` from `start` (fewer where it ends); `None` when nothing could be read
/// (a read past the end, a FIFO, a folder): the checked way then says what is wrong, as it
/// would have.
#[cfg(target_os = "linux")]
fn pread_range(file: &File, start: u64, len: usize) -> Option<Vec<u8>> {
    let mut buf = Vec::with_capacity(len);
    while buf.len() < len {
        let offset = start + buf.len() as u64;
        match rustix::io::pread(file, rustix::buffer::spare_capacity(&mut buf), offset) {
            Ok(0) => break,
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return None,
        }
    }
    (!buf.is_empty()).then_some(buf)
}

/// The whole of `rel`: at most the size it had when opened, and at most
/// [`MAX_WHOLE_FILE_BYTES`].
pub(crate) fn read_whole(root: &Path, rel: &str) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let (file, size) = open(root, rel)?;
    if size > MAX_WHOLE_FILE_BYTES {
        return Err(refused(format!(
            "{size} bytes, more than the {MAX_WHOLE_FILE_BYTES} bytes a file of a run is read \
             whole up to"
        )));
    }
    let mut buf = Vec::with_capacity(size as usize);
    file.take(size).read_to_end(&mut buf)?;
    Ok(buf)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// With the run's folder held, files open as without: a regular file inside the run is
    /// read, a link out of it, a folder and a FIFO are refused, a link inside it is followed;
    /// a file of another folder is opened by its own path, and the hold ends when dropped.
    #[test]
    fn files_opened_from_a_held_folder_are_checked_as_without_it() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.json"), b"secret").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir_all(run.join("index/000000000")).unwrap();
        std::fs::write(run.join("index/000000000/a.json"), b"{}").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.json"), run.join("out.json"))
            .unwrap();
        std::os::unix::fs::symlink("index/000000000/a.json", run.join("in.json")).unwrap();
        let fifo = std::process::Command::new("mkfifo")
            .arg(run.join("fifo.json"))
            .status()
            .unwrap();
        assert!(fifo.success());
        let other = dir.path().join("other");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("b.json"), b"[1]").unwrap();
        let answers = || {
            let read = |root: &Path, rel: &str| {
                open(root, rel).map(|(mut f, size)| {
                    let mut text = String::new();
                    std::io::Read::read_to_string(&mut f, &mut text).unwrap();
                    (text, size)
                })
            };
            [
                format!("{:?}", read(&run, "index/000000000/a.json")),
                format!("{:?}", read(&run, "in.json")),
                format!("{:?}", read(&run, "out.json").map_err(|e| e.kind())),
                format!("{:?}", read(&run, "index").map_err(|e| e.kind())),
                format!("{:?}", read(&run, "fifo.json").map_err(|e| e.to_string())),
                format!("{:?}", read(&run, "gone.json").map_err(|e| e.kind())),
                format!("{:?}", read(&other, "b.json")),
            ]
        };
        let without = answers();
        assert_eq!(without[0], r#"Ok(("{}", 2))"#);
        assert_eq!(without[1], r#"Ok(("{}", 2))"#);
        assert!(without[2].starts_with("Err"), "{}", without[2]);
        assert!(without[4].contains("a FIFO"), "{}", without[4]);
        assert_eq!(without[6], r#"Ok(("[1]", 3))"#);
        {
            let _held = HeldRoot::hold(&run);
            #[cfg(target_os = "linux")]
            assert!(HELD.with_borrow(|h| h.is_some()));
            assert_eq!(answers(), without);
        }
        #[cfg(target_os = "linux")]
        assert!(HELD.with_borrow(|h| h.is_none()), "let go when dropped");
    }
}
