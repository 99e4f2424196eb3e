//! Folders in tests: copied whole ([`copy_tree`]), their files listed ([`every_file`]), their
//! contents as a value ([`snapshot`]):
//! taken before and after, equal snapshots prove that nothing under the folder was written,
//! added, removed or relinked, even as root (for whom a read-only mode bit stops nothing), and a
//! person's project folder that no run may claim ([`project_folder`]).

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

/// Every file under `dir`, at any depth (folders followed, not listed).
pub fn every_file(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(every_file(&path));
        } else {
            files.push(path);
        }
    }
    files
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

/// What the file a [`project_folder`]'s link points to holds.
pub const OUTSIDE_TEXT: &str = "the link's target\n";

/// A person's project folder at `root/project`: sources (`src/main.rs`), a `README.md`, and a
/// symbolic link `link` to the file `root/outside.txt` (holding [`OUTSIDE_TEXT`]), a folder no
/// run may claim or write into. The folder and the file outside it.
pub fn project_folder(root: &Path) -> (PathBuf, PathBuf) {
    let project = root.join("project");
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::write(project.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(project.join("README.md"), "# my project\n").unwrap();
    let outside = root.join("outside.txt");
    std::fs::write(&outside, OUTSIDE_TEXT).unwrap();
    std::os::unix::fs::symlink(&outside, project.join("link")).unwrap();
    (project, outside)
}
