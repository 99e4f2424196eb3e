//! Profiling a command: run it while sampling the host and its process tree.

use std::process::{Command, ExitStatus};
use std::sync::Arc;

use smdebug_storage::Storage;

use super::error::{ProfilerError, Result};
use super::sampler::{SamplerConfig, SamplerReport, SystemSampler};

/// How a profiled command ended and what the sampler recorded meanwhile.
#[derive(Debug)]
pub struct ProfiledCommand {
    /// The command's exit status.
    pub status: ExitStatus,
    /// What the sampler did.
    pub sampler: SamplerReport,
}

/// Spawns `command` (inheriting this process's standard streams), samples the host and the
/// command's process tree (the child and every descendant) with `config` into `storage` until
/// the command exits, and returns its exit status.
///
/// The configuration is validated before anything runs. Once the command is running it is
/// always waited for: if the sampler cannot start, the command still runs to completion and
/// the error is returned afterwards.
///
/// ```no_run
/// use std::process::Command;
/// use std::sync::Arc;
/// use smdebug_profiler::system::{SamplerConfig, profile_command};
///
/// let mut command = Command::new("python3");
/// command.args(["train.py", "--epochs", "1"]);
/// let outcome = profile_command(
///     command,
///     SamplerConfig::default(),
///     smdebug_storage::open_storage("/tmp/run")?,
/// )?;
/// println!("exit: {}, {} samples", outcome.status, outcome.sampler.samples);
/// # Ok::<(), smdebug_profiler::ProfilerError>(())
/// ```
pub fn profile_command(
    mut command: Command,
    config: SamplerConfig,
    storage: Arc<dyn Storage>,
) -> Result<ProfiledCommand> {
    config.validate()?;
    let program = command.get_program().to_string_lossy().into_owned();
    let mut child = command.spawn().map_err(|source| ProfilerError::Command {
        action: "spawn",
        program: program.clone(),
        source,
    })?;
    let sampler = SystemSampler::start(config.watch_pid(child.id()), storage);
    let status = child.wait().map_err(|source| ProfilerError::Command {
        action: "wait for",
        program,
        source,
    });
    let report = sampler?.stop()?;
    Ok(ProfiledCommand {
        status: status?,
        sampler: report,
    })
}
