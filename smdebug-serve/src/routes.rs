//! The API's routes and their handlers: each finds the run, computes its view (on a blocking
//! thread when it reads tensor values) and answers JSON.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path as UrlPath, Query, State};
use axum::handler::Handler;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::Deserialize;
use smdebug_format::stop::StopRequest;
use smdebug_io::stop::{StopOutcome, request_stop};
use smdebug_read::follow::DataArea;

use crate::api::{self, Window};
use crate::code::{self, CodeFile, CodeWindows};
use crate::guard;
use crate::page::Page;
use crate::run::Run;
use crate::series::{ApiError, Kineto, KinetoRank, StopWritten};
use crate::state::{AppState, Shared};
use crate::{assets, compress, push, system, tensor_views};

/// What a route of the API answers with when it succeeds (a failure is an [`ApiError`]).
#[derive(Clone, Copy)]
pub(crate) enum Answer {
    /// JSON of one type (its schema, as [`SchemaGenerator::subschema_for`] gives it).
    Json(fn(&mut SchemaGenerator) -> Schema),
    /// Server-sent events whose `data:` lines are JSON of one type.
    Events(fn(&mut SchemaGenerator) -> Schema),
    /// A file of this media type.
    File(&'static str),
}

/// `T` as JSON.
fn json<T: JsonSchema>() -> Answer {
    Answer::Json(SchemaGenerator::subschema_for::<T>)
}

/// One route of the API: its method, path (under `/api`), what it answers and its handler.
/// The router is built from these and the API's schema is drawn from them
/// ([`crate::schema`]): a route cannot be served without saying what it answers.
pub(crate) struct Endpoint {
    /// `GET` or `POST`.
    pub method: &'static str,
    /// The path under `/api`, with its `{parameters}`.
    pub path: &'static str,
    /// What it answers.
    pub answer: Answer,
    handler: MethodRouter<Shared>,
}

impl Endpoint {
    fn get<H: Handler<T, Shared>, T: 'static>(path: &'static str, h: H, answer: Answer) -> Self {
        Endpoint {
            method: "GET",
            path,
            answer,
            handler: get(h),
        }
    }

    fn post<H: Handler<T, Shared>, T: 'static>(path: &'static str, h: H, answer: Answer) -> Self {
        Endpoint {
            method: "POST",
            path,
            answer,
            handler: post(h),
        }
    }
}

/// Every route of the API.
pub(crate) fn endpoints() -> Vec<Endpoint> {
    use crate::push_views::Push;
    use crate::series::{
        EveryValue, ScalarPage, SpanList, Steps, SystemPage, TensorGrid, TensorHistograms,
        TensorSteps,
    };
    use crate::views::{Headlines, Overview, RunList};
    vec![
        Endpoint::get("/runs", runs, json::<RunList>()),
        Endpoint::get(
            "/events",
            push::events,
            Answer::Events(SchemaGenerator::subschema_for::<Push>),
        ),
        Endpoint::get("/kineto", kineto, json::<Kineto<'static>>()),
        Endpoint::get("/runs/{id}/overview", overview, json::<Overview>()),
        Endpoint::get("/runs/{id}/headlines", headlines, json::<Headlines>()),
        Endpoint::get("/runs/{id}/system", system, json::<SystemPage>()),
        Endpoint::get("/runs/{id}/spans", spans, json::<SpanList>()),
        Endpoint::get("/runs/{id}/steps", steps, json::<Steps>()),
        Endpoint::get("/runs/{id}/scalars", scalars, json::<ScalarPage>()),
        Endpoint::get(
            "/runs/{id}/scalars/values",
            every_value,
            json::<EveryValue>(),
        ),
        Endpoint::get("/runs/{id}/tensor", tensor, json::<TensorSteps>()),
        Endpoint::get(
            "/runs/{id}/tensor_histograms",
            tensor_histograms,
            json::<TensorHistograms>(),
        ),
        Endpoint::get("/runs/{id}/tensor2d", tensor2d, json::<TensorGrid>()),
        Endpoint::get(
            "/runs/{id}/report",
            report,
            Answer::File("text/html; charset=utf-8"),
        ),
        Endpoint::get("/runs/{id}/code", code_windows, json::<CodeWindows>()),
        Endpoint::get(
            "/runs/{id}/code/{window}/flamegraph.svg",
            code_flamegraph,
            Answer::File("image/svg+xml"),
        ),
        Endpoint::get(
            "/runs/{id}/code/{window}/profile.pb.gz",
            code_pprof,
            Answer::File("application/octet-stream"),
        ),
        Endpoint::post("/runs/{id}/stop", stop, json::<StopWritten>()),
    ]
}

/// Every route: the page, and the API behind the token check.
pub(crate) fn router(state: Shared) -> Router {
    let api = endpoints()
        .into_iter()
        .fold(Router::new(), |api, e| api.route(e.path, e.handler))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state.guard),
            guard::require_token,
        ));
    assets::routes()
        .nest("/api", api)
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state.guard),
            guard::check,
        ))
        .layer(middleware::from_fn(assets::security_headers))
        .layer(middleware::from_fn(compress::gzip))
        .with_state(state)
}

pub(crate) fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let body = ApiError {
        error: message.into(),
    };
    (status, axum::Json(body)).into_response()
}

fn find_run(state: &AppState, id: usize) -> Result<Arc<Run>, Box<Response>> {
    state
        .runs
        .get(id)
        .cloned()
        .ok_or_else(|| Box::new(error(StatusCode::NOT_FOUND, format!("no run {id}"))))
}

async fn runs(State(state): State<Shared>) -> Response {
    axum::Json(api::runs(&state.runs)).into_response()
}

async fn kineto(State(state): State<Shared>) -> Response {
    let ranks = state
        .traces
        .iter()
        .map(|r| KinetoRank {
            rank: r.rank,
            file: &r.file,
            span_us: r.span_us,
            gpu_busy_us: r.gpu_busy_us,
            gpu_idle_us: r.gpu_idle_us,
            gpu_kernels: &r.gpu_kernels[..r.gpu_kernels.len().min(20)],
            cpu_operators: &r.cpu_operators[..r.cpu_operators.len().min(20)],
            gpu_kernel_total_us: r.gpu_kernel_total_us,
        })
        .collect();
    axum::Json(Kineto { ranks }).into_response()
}

#[derive(Deserialize)]
struct HeadlinesQuery {
    points: Option<usize>,
    loss_width: Option<u64>,
    loss_since: Option<u64>,
    accuracy_width: Option<u64>,
    accuracy_since: Option<u64>,
}

async fn headlines(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<usize>,
    Query(q): Query<HeadlinesQuery>,
) -> Response {
    use crate::overview::Held;
    let window = Window {
        from: None,
        to: None,
        points: q.points,
    };
    let held = [
        Held {
            width: q.loss_width,
            since: q.loss_since,
        },
        Held {
            width: q.accuracy_width,
            since: q.accuracy_since,
        },
    ];
    let run = match find_run(&state, id) {
        Ok(r) => r,
        Err(e) => return *e,
    };
    match tokio::task::spawn_blocking(move || crate::overview::headlines(&run, &window, held)).await
    {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn overview(State(state): State<Shared>, UrlPath(id): UrlPath<usize>) -> Response {
    match find_run(&state, id) {
        Ok(run) => axum::Json(crate::overview::overview(&run)).into_response(),
        Err(e) => *e,
    }
}

// A handler takes the window (`from`, `to`, `points`) and the page (`offset`, `limit`) as
// extractors of their own, each reading its fields from the same query string: serde's
// `flatten` would hand the query-string deserializer strings where numbers are wanted.
async fn system(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<usize>,
    Query(window): Query<Window>,
    Query(page): Query<Page>,
) -> Response {
    let run = match find_run(&state, id) {
        Ok(r) => r,
        Err(e) => return *e,
    };
    // A window finer than the summaries is read again from the files: blocking I/O.
    match tokio::task::spawn_blocking(move || system::system(&run, &window, page)).await {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

#[derive(Deserialize)]
struct SpansQuery {
    #[serde(default)]
    last: bool,
    /// A column to sort the window's spans by.
    sort: Option<crate::series::SpanSort>,
    /// `asc` (the default) or `desc`.
    order: Option<String>,
}

async fn spans(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<usize>,
    Query(window): Query<Window>,
    Query(page): Query<Page>,
    Query(q): Query<SpansQuery>,
) -> Response {
    let descending = match q.order.as_deref() {
        None | Some("asc") => false,
        Some("desc") => true,
        Some(other) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("order must be asc or desc, not {other:?}"),
            );
        }
    };
    let rows = api::SpanRows {
        from_end: q.last,
        offset: page.offset,
        limit: page.limit,
        sort: q.sort,
        descending,
    };
    let run = match find_run(&state, id) {
        Ok(r) => r,
        Err(e) => return *e,
    };
    // The window's spans are read again from the files: blocking I/O.
    match tokio::task::spawn_blocking(move || api::spans(&run, &window, rows)).await {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

#[derive(Deserialize)]
struct StepsQuery {
    last: Option<usize>,
    /// The slowest steps listed (20 by default, at most 500).
    slowest: Option<usize>,
}

async fn steps(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<usize>,
    Query(window): Query<Window>,
    Query(q): Query<StepsQuery>,
) -> Response {
    let run = match find_run(&state, id) {
        Ok(r) => r,
        Err(e) => return *e,
    };
    // The steps' spans are read again from the files: blocking I/O.
    let (last, slowest) = (q.last.unwrap_or(30), q.slowest.unwrap_or(20));
    match tokio::task::spawn_blocking(move || api::steps(&run, &window, last, slowest)).await {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

#[derive(Deserialize)]
struct ScalarQuery {
    regex: Option<String>,
    smoothing: Option<f64>,
}

async fn scalars(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<usize>,
    Query(window): Query<Window>,
    Query(page): Query<Page>,
    Query(q): Query<ScalarQuery>,
) -> Response {
    let run = match find_run(&state, id) {
        Ok(r) => r,
        Err(e) => return *e,
    };
    let smoothing = match crate::downsample::smoothing_weight(q.smoothing) {
        Ok(w) => w,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let regex = q.regex;
    match tokio::task::spawn_blocking(move || {
        api::scalars(&run, regex.as_deref(), &window, smoothing, page)
    })
    .await
    {
        Ok(Ok(v)) => axum::Json(v).into_response(),
        Ok(Err(e)) => error(StatusCode::BAD_REQUEST, e),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

#[derive(Deserialize)]
struct EveryValueQuery {
    regex: Option<String>,
    from: Option<u64>,
    to: Option<u64>,
}

async fn every_value(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<usize>,
    Query(q): Query<EveryValueQuery>,
) -> Response {
    use api::EveryValueError as E;
    let most = state.max_download_values;
    let run = match find_run(&state, id) {
        Ok(r) => r,
        Err(e) => return *e,
    };
    match tokio::task::spawn_blocking(move || {
        api::every_value(&run, q.regex.as_deref(), (q.from, q.to), most)
    })
    .await
    {
        Ok(Ok(v)) => axum::Json(v).into_response(),
        Ok(Err(E::BadRegex(e))) => error(StatusCode::BAD_REQUEST, e),
        Ok(Err(E::NoMatch(e))) => error(StatusCode::NOT_FOUND, e),
        Ok(Err(E::TooMany(e))) => error(StatusCode::PAYLOAD_TOO_LARGE, e),
        Ok(Err(E::Unreadable(e))) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

#[derive(Deserialize)]
struct TensorQuery {
    name: String,
    step: Option<u64>,
    steps: Option<usize>,
    side: Option<usize>,
    bins: Option<usize>,
}

/// Runs `f` over the run's trial on a blocking thread (tensor values are read from storage).
async fn with_trial<T: serde::Serialize + Send + 'static>(
    state: &AppState,
    id: usize,
    f: impl FnOnce(&smdebug_read::Trial) -> Result<T, String> + Send + 'static,
) -> Response {
    let run = match find_run(state, id) {
        Ok(r) => r,
        Err(e) => return *e,
    };
    match tokio::task::spawn_blocking(move || f(&*run.open_trial()?)).await {
        Ok(Ok(v)) => axum::Json(v).into_response(),
        Ok(Err(e)) => error(StatusCode::NOT_FOUND, e),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn tensor(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<usize>,
    Query(q): Query<TensorQuery>,
) -> Response {
    let steps = q.steps.unwrap_or(100);
    if let Ok(run) = find_run(&state, id)
        && let Some(v) = tensor_views::scalar_over_steps(&run, &q.name, steps)
    {
        return axum::Json(v).into_response();
    }
    with_trial(&state, id, move |t| {
        tensor_views::tensor_over_steps(t, &q.name, steps)
    })
    .await
}

async fn tensor_histograms(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<usize>,
    Query(q): Query<TensorQuery>,
) -> Response {
    let (steps, bins) = (q.steps.unwrap_or(50), q.bins.unwrap_or(30));
    with_trial(&state, id, move |t| {
        tensor_views::tensor_histograms(t, &q.name, steps, bins)
    })
    .await
}

async fn tensor2d(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<usize>,
    Query(q): Query<TensorQuery>,
) -> Response {
    let side = q.side.unwrap_or(128);
    if let Ok(run) = find_run(&state, id) {
        let (name, step) = (q.name.clone(), q.step);
        if let Ok(Some(v)) =
            tokio::task::spawn_blocking(move || tensor_views::scalar_2d(&run, &name, step)).await
        {
            return axum::Json(v).into_response();
        }
    }
    with_trial(&state, id, move |t| {
        tensor_views::tensor_2d(t, &q.name, q.step, side)
    })
    .await
}

/// Why a run has nothing to report, when it has not: its folder does not exist, or nothing of
/// it was found yet, or it holds neither profiler data nor rule statuses.
fn nothing_to_report(run: &Run) -> Option<String> {
    let d = run.data.read().expect("run data lock");
    if let Some(e) = &d.open_error {
        return Some(format!("no report: {} cannot be opened: {e}", run.location));
    }
    if d.missing_since.is_some() {
        return Some(format!(
            "no report: there is no run at {} (the folder does not exist)",
            run.location
        ));
    }
    if !d.exists {
        return Some(format!(
            "no report: nothing of the run at {} was found yet",
            run.location
        ));
    }
    if d.digest.is_empty() && d.rules.is_none() {
        return Some(format!(
            "no report: the run at {} has no profiler data (system metrics, framework spans) and \
             no rule statuses",
            run.location
        ));
    }
    None
}

async fn report(State(state): State<Shared>, UrlPath(id): UrlPath<usize>) -> Response {
    let run = match find_run(&state, id) {
        Ok(r) => r,
        Err(e) => return *e,
    };
    // A report of nothing is refused, with why (not an empty report with 200).
    if let Some(why) = nothing_to_report(&run) {
        return error(StatusCode::NOT_FOUND, why);
    }
    // One report at a time: each holds a copy of its run's data while it is drawn. Another
    // request meanwhile is refused, not queued (a queue would hold its memory too).
    let _permit = match state.report_slots.try_acquire() {
        Ok(permit) => permit,
        Err(tokio::sync::TryAcquireError::NoPermits) => {
            return error(
                StatusCode::TOO_MANY_REQUESTS,
                "a report is being built (one at a time): try again when it is done",
            );
        }
        Err(tokio::sync::TryAcquireError::Closed) => {
            return error(StatusCode::SERVICE_UNAVAILABLE, "the server is stopping");
        }
    };
    let name = run.name.clone();
    let held = Arc::clone(&run);
    let state = Arc::clone(&state);
    let built = tokio::task::spawn_blocking(move || {
        // Each stage is shown by the page (the `report` field of the runs, sent on change).
        let progress = |stage: Option<&'static str>| {
            if let Ok(mut s) = run.report_stage.lock() {
                *s = stage;
            }
            state.notify.send_modify(|v| *v += 1);
        };
        crate::report::build(&run, &state.traces, &progress)
    })
    .await;
    match built {
        Ok(html) => {
            let file = smdebug_report::safe_file_stem(&name);
            let mut headers = HeaderMap::new();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            );
            if let Ok(v) = HeaderValue::from_str(&format!(
                "attachment; filename=\"{file}-profiler-report.html\""
            )) {
                headers.insert(header::CONTENT_DISPOSITION, v);
            }
            (headers, html).into_response()
        }
        Err(e) => {
            if let Ok(mut s) = held.report_stage.lock() {
                *s = None;
            }
            error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
        }
    }
}

async fn code_windows(State(state): State<Shared>, UrlPath(id): UrlPath<usize>) -> Response {
    let run = match find_run(&state, id) {
        Ok(r) => r,
        Err(e) => return *e,
    };
    let d = run.data.read().expect("run data lock");
    let warnings = d
        .problems
        .list()
        .iter()
        .filter(|p| p.area() == DataArea::CodeProfiles)
        .map(ToString::to_string)
        .collect();
    axum::Json(code::windows(&d.code_windows, warnings)).into_response()
}

async fn code_file(state: &AppState, id: usize, window: String, which: CodeFile) -> Response {
    let run = match find_run(state, id) {
        Ok(r) => r,
        Err(e) => return *e,
    };
    let held: Vec<_> = run
        .data
        .read()
        .expect("run data lock")
        .code_windows
        .iter()
        .filter(|w| w.file.id() == window)
        .cloned()
        .collect();
    let read =
        tokio::task::spawn_blocking(move || code::file(run.storage(), &held, &window, which)).await;
    let bytes = match read {
        Ok(Ok(Some(bytes))) => bytes,
        Ok(Ok(None)) => return error(StatusCode::NOT_FOUND, "no such code-profile file"),
        Ok(Err(e)) => return error(StatusCode::BAD_GATEWAY, e),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let mut headers = HeaderMap::new();
    match which {
        CodeFile::Flamegraph => {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("image/svg+xml"),
            );
            headers.insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(code::FLAMEGRAPH_CSP),
            );
        }
        CodeFile::Pprof => {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            );
            headers.insert(
                header::CONTENT_DISPOSITION,
                HeaderValue::from_static("attachment; filename=\"profile.pb.gz\""),
            );
        }
    }
    (headers, bytes).into_response()
}

async fn code_flamegraph(
    State(state): State<Shared>,
    UrlPath((id, window)): UrlPath<(usize, String)>,
) -> Response {
    code_file(&state, id, window, CodeFile::Flamegraph).await
}

async fn code_pprof(
    State(state): State<Shared>,
    UrlPath((id, window)): UrlPath<(usize, String)>,
) -> Response {
    code_file(&state, id, window, CodeFile::Pprof).await
}

#[derive(Deserialize)]
struct StopBody {
    #[serde(default)]
    confirm: bool,
    reason: Option<String>,
}

async fn stop(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<usize>,
    axum::Json(body): axum::Json<StopBody>,
) -> Response {
    let run = match find_run(&state, id) {
        Ok(r) => r,
        Err(e) => return *e,
    };
    if !body.confirm {
        return error(
            StatusCode::BAD_REQUEST,
            "a stop request needs {\"confirm\": true}",
        );
    }
    let writable = run.data.read().map(|d| d.writable).unwrap_or(false);
    let (true, Some(storage)) = (writable, run.storage()) else {
        return error(
            StatusCode::FORBIDDEN,
            "this server cannot write into the run (read-only, or no write access)",
        );
    };
    let reason = body
        .reason
        .filter(|r| !r.trim().is_empty())
        .unwrap_or_else(|| "stopped from the smdebug serve dashboard".to_owned());
    let request = StopRequest::new(reason);
    match tokio::task::spawn_blocking(move || request_stop(storage.as_ref(), &request)).await {
        Ok(Ok(outcome)) => axum::Json(StopWritten {
            requested: true,
            already: match outcome {
                StopOutcome::Written => None,
                StopOutcome::AlreadyRequested(earlier) => Some(earlier.reason),
            },
        })
        .into_response(),
        Ok(Err(e)) => error(StatusCode::BAD_GATEWAY, e.to_string()),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}
