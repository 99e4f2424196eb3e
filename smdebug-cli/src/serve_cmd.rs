//! `smdebug serve`: the live dashboard (smdebug-serve) of one or more runs.

use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use smdebug_serve::{ServeOptions, Server};
use smdebug_storage::Location;

#[derive(Args)]
pub struct ServeArgs {
    /// Runs to show: run folders, folders of runs (each subfolder that is a run is compared
    /// side by side), object-store URLs of a run or of a prefix holding runs (s3://bucket/jobs/,
    /// gs://, az://; each run under the prefix is compared side by side). A run may still be
    /// being written, or not exist yet.
    #[arg(required = true)]
    runs: Vec<Location>,
    /// Port to listen on (0: any free port).
    #[arg(long, default_value_t = 6007)]
    port: u16,
    /// Address to listen on. Anything but a loopback address makes the dashboard require the
    /// token printed at start.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// PyTorch profiler (Kineto) trace files for the Kineto panel (.json or .json.gz).
    #[arg(long = "trace")]
    traces: Vec<PathBuf>,
    /// Never write into the runs (the stop button is disabled).
    #[arg(long)]
    read_only: bool,
    /// How often each run is looked at for new data, in milliseconds.
    #[arg(long, default_value_t = 200)]
    poll_ms: u64,
}

pub fn run(args: ServeArgs, max_tensor_bytes: u64) -> ExitCode {
    // A local run that does not exist is waited for (a job may start after the dashboard), and
    // said at once: a mistyped path shows here, not only as a page that waits.
    for run in &args.runs {
        let Some(dir) = run.local_path() else {
            continue;
        };
        if !dir.exists() {
            eprintln!(
                "smdebug: no run at {run} yet (the folder does not exist): the dashboard waits \
                 for it and says how long it has waited"
            );
        }
    }
    let mut options = ServeOptions::new(args.runs);
    options.max_tensor_bytes = max_tensor_bytes;
    options.host = args.host;
    options.port = args.port;
    options.traces = args.traces;
    options.read_only = args.read_only;
    options.poll = Duration::from_millis(args.poll_ms.clamp(20, 60_000));
    let server = match Server::start(options) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("smdebug: {e}");
            return ExitCode::from(2);
        }
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", server.url());
    if let Some(token) = server.token() {
        let _ = writeln!(
            out,
            "token: {token} (listening on {}: the page asks for it when the URL lacks it)",
            server.addr()
        );
    }
    let _ = out.flush();
    drop(out);
    server.wait();
    ExitCode::SUCCESS
}
