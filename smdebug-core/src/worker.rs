//! Which worker of a distributed job this process is.
//!
//! Every process of a job writes its own files (`worker_<rank>`) into one run, and the
//! collections file records how many workers the job has, so a reader knows when a step is
//! complete. Launchers announce the rank in the environment: `torchrun` and most Rust launchers
//! set `RANK` and `WORLD_SIZE`; Open MPI sets `OMPI_COMM_WORLD_RANK`/`OMPI_COMM_WORLD_SIZE`;
//! Slurm sets `SLURM_PROCID`/`SLURM_NTASKS`. [`WorkerInfo::from_env`] reads them in that order.
//!
//! ```
//! use smdebug_core::WorkerInfo;
//!
//! let me = WorkerInfo::from_vars(|name| match name {
//!     "RANK" => Some("1".into()),
//!     "WORLD_SIZE" => Some("2".into()),
//!     _ => None,
//! })
//! .unwrap();
//! assert_eq!((me.rank, me.world_size), (1, 2));
//! assert_eq!(WorkerInfo::single(), WorkerInfo { rank: 0, world_size: 1 });
//! ```

use crate::error::{Error, Result};

/// This process's rank and the number of processes in the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkerInfo {
    /// 0-based rank, below `world_size`.
    pub rank: usize,
    /// Number of workers writing into the run.
    pub world_size: usize,
}

/// Environment variable pairs (rank, size) that launchers set, in the order they are tried.
const LAUNCHER_VARS: [(&str, &str); 3] = [
    ("RANK", "WORLD_SIZE"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("SLURM_PROCID", "SLURM_NTASKS"),
];

impl WorkerInfo {
    /// A job of one process.
    pub fn single() -> WorkerInfo {
        WorkerInfo {
            rank: 0,
            world_size: 1,
        }
    }

    /// A worker of a job of `world_size` processes; the rank must be below the size.
    pub fn new(rank: usize, world_size: usize) -> Result<WorkerInfo> {
        if world_size == 0 || rank >= world_size {
            return Err(Error::Config(format!(
                "worker rank {rank} is not below the number of workers {world_size}"
            )));
        }
        Ok(WorkerInfo { rank, world_size })
    }

    /// Reads the rank from the process environment (see the module docs); a process started
    /// without a launcher is the single worker of its job. A variable that is set but is not a
    /// number, a rank without a size, or a rank not below the size is an error naming it.
    pub fn from_env() -> Result<WorkerInfo> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// [`from_env`](Self::from_env) over any variable lookup (tests, config files).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<WorkerInfo> {
        for (rank_var, size_var) in LAUNCHER_VARS {
            let rank = var(rank_var);
            let size = var(size_var);
            match (rank, size) {
                (None, None) => continue,
                (Some(_), None) => {
                    return Err(Error::Config(format!(
                        "{rank_var} is set but {size_var} is not: set both, or neither for a \
                         single-process job"
                    )));
                }
                (None, Some(size)) => {
                    // A size alone (some launchers export it to every process) says nothing about
                    // this process; only a size of 1 is unambiguous.
                    if parse(size_var, &size)? == 1 {
                        return Ok(WorkerInfo::single());
                    }
                    return Err(Error::Config(format!(
                        "{size_var}={size} is set but {rank_var} is not: this process's rank is \
                         unknown"
                    )));
                }
                (Some(rank), Some(size)) => {
                    let rank = parse(rank_var, &rank)?;
                    let size = parse(size_var, &size)?;
                    return WorkerInfo::new(rank, size).map_err(|_| {
                        Error::Config(format!("{rank_var}={rank} is not below {size_var}={size}"))
                    });
                }
            }
        }
        Ok(WorkerInfo::single())
    }
}

fn parse(name: &str, value: &str) -> Result<usize> {
    value.trim().parse().map_err(|_| {
        Error::Config(format!(
            "{name}={value:?} is not a non-negative whole number"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let owned: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| {
            owned
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn no_launcher_means_one_worker() {
        assert_eq!(
            WorkerInfo::from_vars(vars(&[])).unwrap(),
            WorkerInfo::single()
        );
        assert_eq!(
            WorkerInfo::from_vars(vars(&[("WORLD_SIZE", "1")])).unwrap(),
            WorkerInfo::single()
        );
    }

    #[test]
    fn launchers_are_read_in_order() {
        let w = WorkerInfo::from_vars(vars(&[("RANK", "3"), ("WORLD_SIZE", "4")])).unwrap();
        assert_eq!((w.rank, w.world_size), (3, 4));
        let w = WorkerInfo::from_vars(vars(&[
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "8"),
        ]))
        .unwrap();
        assert_eq!((w.rank, w.world_size), (1, 2));
        let w =
            WorkerInfo::from_vars(vars(&[("SLURM_PROCID", "5"), ("SLURM_NTASKS", "8")])).unwrap();
        assert_eq!((w.rank, w.world_size), (5, 8));
    }

    #[test]
    fn inconsistent_environments_are_refused_with_the_variable_named() {
        let err =
            |pairs: &[(&str, &str)]| WorkerInfo::from_vars(vars(pairs)).unwrap_err().to_string();
        assert!(err(&[("RANK", "1")]).contains("WORLD_SIZE is not"));
        assert!(err(&[("WORLD_SIZE", "2")]).contains("RANK is not"));
        assert!(err(&[("RANK", "x"), ("WORLD_SIZE", "2")]).contains("RANK=\"x\""));
        assert!(err(&[("RANK", "2"), ("WORLD_SIZE", "2")]).contains("not below WORLD_SIZE=2"));
        assert!(err(&[("RANK", "0"), ("WORLD_SIZE", "0")]).contains("not below"));
    }
}
