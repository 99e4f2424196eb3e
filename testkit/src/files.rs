//! Folders in tests: copied whole ([`copy_tree`]), and their contents as a value
//! ([`snapshot`]): taken before and after, equal snapshots prove that nothing under the folder
//! was written, added, removed or relinked, even as root (for whom a read-only mode bit stops
//! nothing).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One entry of a [`snapshot`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A file, with its bytes.
    File(Vec<u8>),
    /// A folder (its entries are entries of their own).
    Folder,
    /// A symbolic link, with where it points (not followed).
    Link(PathBuf),
}

/// Every file, folder and link under `dir` (not `dir` itself), by its path relative to `dir`.
pub fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Entry> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let kind = e.file_type().unwrap();
            let rel = e.path().strip_prefix(dir).unwrap().to_path_buf();
            let entry = if kind.is_symlink() {
                Entry::Link(std::fs::read_link(e.path()).unwrap())
            } else if kind.is_dir() {
                stack.push(e.path());
                Entry::Folder
            } else {
                Entry::File(std::fs::read(e.path()).unwrap())
            };
            out.insert(rel, entry);
        }
    }
    out
}

/// Copies the folder `from` with everything under it to `to` (created, with its parents), so
/// that a test may change a run without touching the one it was copied from.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
