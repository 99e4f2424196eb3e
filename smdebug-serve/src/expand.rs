//! Which runs the command's arguments name: a run folder or prefix, or a folder or prefix of
//! runs (one run per subfolder), and the random token of a non-loopback server.

use std::path::PathBuf;

use smdebug_read::run::{is_run_entry, local_folder_is_run, store_is_run};
use smdebug_storage::Location;
use smdebug_storage::StorageOptions;

/// The runs directly under an object-store prefix that is not itself a run: the first path
/// component of every key that continues with a run's entry (one listing of the prefix).
fn store_children(storage: &dyn smdebug_storage::Storage) -> Vec<String> {
    let Ok(keys) = storage.list("") else {
        return Vec::new();
    };
    let mut children: Vec<String> = keys
        .iter()
        .filter_map(|key| {
            let (child, rest) = key.split_once('/')?;
            let entry = rest.split('/').next().unwrap_or(rest);
            is_run_entry(entry).then(|| child.to_owned())
        })
        .collect();
    children.dedup();
    children.sort();
    children.dedup();
    children
}

/// The runs behind the command's arguments, as `(name, location)`: a local folder, or an
/// object-store prefix (`s3://bucket/jobs/`), that is not itself a run but has subfolders that
/// are becomes one run per subfolder (sorted by name); anything else (a run, an empty or
/// missing folder or prefix) is one run. Names are the last path component, made unique.
/// Object stores are reached with the default options (the environment's credentials); see
/// [`expand_runs_with`].
pub fn expand_runs(args: &[Location]) -> Vec<(String, Location)> {
    expand_runs_with(args, &StorageOptions::default())
}

/// [`expand_runs`], object stores reached with `options`. A prefix that cannot be opened or
/// listed is kept as one run (its follower reports why it cannot be read).
pub fn expand_runs_with(args: &[Location], options: &StorageOptions) -> Vec<(String, Location)> {
    expand_runs_but(args, options, |_| false)
}

/// [`expand_runs_with`], but a location `one_run` says is one run is taken as it is, without
/// opening or listing it (a run the server is given the storage of).
pub(crate) fn expand_runs_but(
    args: &[Location],
    options: &StorageOptions,
    one_run: impl Fn(&Location) -> bool,
) -> Vec<(String, Location)> {
    let mut out: Vec<(String, Location)> = Vec::new();
    for arg in args {
        let mut children: Vec<PathBuf> = Vec::new();
        let one_run = one_run(arg);
        if let (false, Location::Store { url, backend }) = (one_run, arg)
            && let Ok(storage) = smdebug_storage::open_storage_with(arg, options)
            && !store_is_run(storage.as_ref())
        {
            let found = store_children(storage.as_ref());
            if !found.is_empty() {
                let root = url.trim_end_matches('/');
                for child in found {
                    let url = format!("{root}/{child}");
                    out.push((
                        child,
                        Location::Store {
                            url,
                            backend: *backend,
                        },
                    ));
                }
                continue;
            }
        }
        if let (false, Some(path)) = (one_run, arg.local_path())
            && path.is_dir()
            && !local_folder_is_run(path)
            && let Ok(entries) = std::fs::read_dir(path)
        {
            children = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_dir() && local_folder_is_run(p))
                .collect();
            children.sort();
        }
        if children.is_empty() {
            let text = arg.to_string();
            let name = text
                .trim_end_matches('/')
                .rsplit('/')
                .next()
                .filter(|n| !n.is_empty())
                .unwrap_or(&text)
                .to_owned();
            out.push((name, arg.clone()));
        } else {
            for child in children {
                let name = child
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                out.push((name, Location::Local(child)));
            }
        }
    }
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for entry in &mut out {
        let n = seen.entry(entry.0.clone()).or_default();
        *n += 1;
        if *n > 1 {
            entry.0 = format!("{} ({n})", entry.0);
        }
    }
    out
}

/// A random token: 128 bits from the OS (`/dev/urandom`), hex.
pub(crate) fn random_token() -> String {
    use std::io::Read;
    let mut buf = [0u8; 16];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .is_ok();
    if !ok {
        // No /dev/urandom: the hasher's random keys, twice.
        use std::hash::{BuildHasher, RandomState};
        let a = RandomState::new().hash_one(std::time::SystemTime::now());
        let b = RandomState::new().hash_one(std::process::id());
        buf[..8].copy_from_slice(&a.to_le_bytes());
        buf[8..].copy_from_slice(&b.to_le_bytes());
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}
