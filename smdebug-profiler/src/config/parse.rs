//! Reading a `profilerconfig.json` text into a [`ProfilerConfig`]: keys case-insensitive, the
//! sub-configs JSON strings (Python dict literals) or objects, numbers possibly strings.

use std::time::{Duration, UNIX_EPOCH};

use serde_json::{Map, Value};
use smdebug_core::config_keys::{KeySet, UnappliedKey, json_kind, unapplied_keys};
use smdebug_core::window::Window;

use super::literal::parse_dict;
use super::model::{
    CProfileTimer, DataloaderProfilingConfig, DetailedProfilingConfig, MetricsRegex,
    ProfilerConfig, ProfilingParameters, PythonProfilerName, PythonProfilingConfig,
};
use crate::system::ProfilerError;

/// The top-level keys this crate reads, in SageMaker's spelling, and `S3OutputPath`, where
/// SageMaker itself uploads `LocalPath` (not the job's business: no warning).
const TOP_KEYS: [&str; 4] = [
    "DisableProfiler",
    "ProfilingIntervalInMilliseconds",
    "ProfilingParameters",
    "S3OutputPath",
];

/// SageMaker's keys of `ProfilingParameters` that nothing here reads.
const PARAMETER_KEYS_NOT_SUPPORTED: [&str; 3] = [
    "ProfilerEnabled",
    "SMDataParallelProfilingConfig",
    "HorovodProfilingConfig",
];

/// A sub-config's window keys.
const WINDOW_KEYS: [&str; 5] = [
    "StartStep",
    "NumSteps",
    "StartTimeInSecSinceEpoch",
    "DurationInSeconds",
    "Duration",
];

/// `ProfilingParameters` keys this crate reads, in SageMaker's spelling, and `S3OutputPath`
/// (SageMaker's, as at the top).
const PARAMETER_KEYS: [&str; 9] = [
    "S3OutputPath",
    "DisableProfiler",
    "LocalPath",
    "RotateMaxFileSizeInBytes",
    "RotateFileCloseIntervalInSeconds",
    "FileOpenFailThreshold",
    "DetailedProfilingConfig",
    "DataloaderProfilingConfig",
    "PythonProfilingConfig",
];

/// Parses the text of a profiler-config file. Errors are
/// [`ProfilerError::BadProfilerConfig`] with the key (its path, in SageMaker's spelling) and
/// the value, and no file (the caller adds it).
pub(crate) fn parse(text: &str) -> Result<ProfilerConfig, ProfilerError> {
    let root: Value = serde_json::from_str(text).map_err(|e| bad("", None, e.to_string()))?;
    let root = match &root {
        Value::Object(map) => Keys::new(map, "")?,
        other => {
            return Err(bad(
                "",
                None,
                format!(
                    "the profiler configuration must be a JSON object, not {}",
                    json_kind(other)
                ),
            ));
        }
    };
    let mut config = ProfilerConfig {
        disable_profiler: root
            .get("DisableProfiler")
            .map(|v| boolean(v, "DisableProfiler"))
            .transpose()?,
        system_interval: root
            .get("ProfilingIntervalInMilliseconds")
            .map(|v| whole(v, "ProfilingIntervalInMilliseconds").map(Duration::from_millis))
            .transpose()?,
        profiling_parameters: None,
        unapplied: root.unapplied(&KeySet::new(&TOP_KEYS)),
    };
    if let Some(v) = root.get_or_null("ProfilingParameters") {
        let params = match v {
            Value::Null => ProfilingParameters::default(),
            Value::Object(map) => {
                let (params, disable) = parameters(map)?;
                config.disable_profiler = match (config.disable_profiler, disable) {
                    (Some(a), Some(b)) => Some(a || b),
                    (a, b) => a.or(b),
                };
                params
            }
            other => {
                return Err(bad(
                    "ProfilingParameters",
                    Some(other),
                    format!("expected an object, found {}", json_kind(other)),
                ));
            }
        };
        config.profiling_parameters = Some(params);
    }
    Ok(config)
}

/// `ProfilingParameters`, and its `DisableProfiler` if stated.
fn parameters(
    map: &Map<String, Value>,
) -> Result<(ProfilingParameters, Option<bool>), ProfilerError> {
    const P: &str = "ProfilingParameters";
    let keys = Keys::new(map, P)?;
    let key = |name: &str| format!("{P}.{name}");
    let disable = keys
        .get("DisableProfiler")
        .map(|v| boolean(v, &key("DisableProfiler")))
        .transpose()?;
    let mut unapplied =
        keys.unapplied(&KeySet::new(&PARAMETER_KEYS).not_supported(&PARAMETER_KEYS_NOT_SUPPORTED));
    let mut params = ProfilingParameters {
        local_path: keys
            .get("LocalPath")
            .map(|v| text(v, &key("LocalPath")))
            .transpose()?,
        rotate_max_file_size: keys
            .get("RotateMaxFileSizeInBytes")
            .map(|v| whole(v, &key("RotateMaxFileSizeInBytes")))
            .transpose()?,
        rotate_file_close_interval: keys
            .get("RotateFileCloseIntervalInSeconds")
            .map(|v| seconds(v, &key("RotateFileCloseIntervalInSeconds")))
            .transpose()?,
        file_open_fail_threshold: keys
            .get("FileOpenFailThreshold")
            .map(|v| {
                let k = key("FileOpenFailThreshold");
                whole(v, &k).and_then(|n| {
                    u32::try_from(n).map_err(|_| bad(&k, Some(v), "is too large".into()))
                })
            })
            .transpose()?,
        detailed: None,
        dataloader: None,
        python: None,
        unapplied: Vec::new(),
    };
    if let Some(v) = keys.get("DetailedProfilingConfig") {
        let k = key("DetailedProfilingConfig");
        let sub = sub_config(v, &k)?;
        unapplied.extend(sub.unapplied(&KeySet::new(&WINDOW_KEYS)));
        params.detailed = Some(DetailedProfilingConfig {
            window: window(&sub, &k)?,
        });
    }
    if let Some(v) = keys.get("DataloaderProfilingConfig") {
        let k = key("DataloaderProfilingConfig");
        let sub = sub_config(v, &k)?;
        unapplied.extend(sub.unapplied(&KeySet::new(&WINDOW_KEYS).and(["MetricsRegex".into()])));
        params.dataloader = Some(dataloader(&sub, &k)?);
    }
    if let Some(v) = keys.get("PythonProfilingConfig") {
        let k = key("PythonProfilingConfig");
        let sub = sub_config(v, &k)?;
        unapplied.extend(sub.unapplied(
            &KeySet::new(&WINDOW_KEYS).and(["ProfilerName".into(), "cProfileTimer".into()]),
        ));
        params.python = Some(python(&sub, &k)?);
    }
    params.unapplied = unapplied;
    Ok((params, disable))
}

fn dataloader(sub: &Keys<'_>, key: &str) -> Result<DataloaderProfilingConfig, ProfilerError> {
    let metrics_regex = match sub.get("MetricsRegex") {
        None => None,
        Some(v) => {
            let k = format!("{key}.MetricsRegex");
            let pattern = text(v, &k)?;
            Some(MetricsRegex::new(&pattern).map_err(|reason| bad(&k, Some(v), reason))?)
        }
    };
    Ok(DataloaderProfilingConfig {
        window: window(sub, key)?,
        metrics_regex,
    })
}

fn python(sub: &Keys<'_>, key: &str) -> Result<PythonProfilingConfig, ProfilerError> {
    let profiler_name = match sub.get("ProfilerName") {
        None => None,
        Some(v) => {
            let k = format!("{key}.ProfilerName");
            Some(match text(v, &k)?.trim().to_ascii_lowercase().as_str() {
                "cprofile" => PythonProfilerName::CProfile,
                "pyinstrument" => PythonProfilerName::Pyinstrument,
                _ => {
                    return Err(bad(
                        &k,
                        Some(v),
                        "is neither cProfile nor Pyinstrument".into(),
                    ));
                }
            })
        }
    };
    // As smdebug: the timer is read only for cProfile (the default profiler).
    let cprofile_timer = match (profiler_name, sub.get("cProfileTimer")) {
        (Some(PythonProfilerName::Pyinstrument), _) | (_, None) => None,
        (_, Some(v)) => {
            let k = format!("{key}.cProfileTimer");
            Some(match text(v, &k)?.trim().to_ascii_lowercase().as_str() {
                "total_time" => CProfileTimer::TotalTime,
                "cpu_time" => CProfileTimer::CpuTime,
                "off_cpu_time" => CProfileTimer::OffCpuTime,
                "default" => CProfileTimer::Default,
                _ => {
                    return Err(bad(
                        &k,
                        Some(v),
                        "is none of total_time, cpu_time, off_cpu_time, default".into(),
                    ));
                }
            })
        }
    };
    Ok(PythonProfilingConfig {
        window: window(sub, key)?,
        profiler_name,
        cprofile_timer,
    })
}

/// The window a sub-config states: a step range, a time range, or neither ([`Window::Never`],
/// as smdebug, which profiles nothing then). Both is an error naming the config.
fn window(sub: &Keys<'_>, key: &str) -> Result<Window, ProfilerError> {
    let field = |name: &str| format!("{key}.{name}");
    let start_step = sub
        .get("StartStep")
        .map(|v| whole(v, &field("StartStep")))
        .transpose()?;
    let num_steps = sub
        .get("NumSteps")
        .map(|v| whole(v, &field("NumSteps")))
        .transpose()?;
    let start_time = sub
        .get("StartTimeInSecSinceEpoch")
        .map(|v| {
            let k = field("StartTimeInSecSinceEpoch");
            seconds(v, &k).and_then(|d| {
                UNIX_EPOCH
                    .checked_add(d)
                    .ok_or_else(|| bad(&k, Some(v), "is too far in the future".into()))
            })
        })
        .transpose()?;
    // The SageMaker Python SDK's TimeRange writes `Duration`; smdebug reads only
    // `DurationInSeconds` (and so profiles one step). Both are read here.
    let duration = match (sub.get("DurationInSeconds"), sub.get("Duration")) {
        (Some(_), Some(_)) => {
            return Err(bad(
                key,
                None,
                "states both DurationInSeconds and Duration: give one".into(),
            ));
        }
        (Some(v), None) => Some(seconds(v, &field("DurationInSeconds"))?),
        (None, Some(v)) => Some(seconds(v, &field("Duration"))?),
        (None, None) => None,
    };
    let steps = start_step.is_some() || num_steps.is_some();
    let time = start_time.is_some() || duration.is_some();
    Ok(match (steps, time) {
        (true, true) => {
            return Err(bad(
                key,
                None,
                "states a step range (StartStep, NumSteps) and a time range \
                 (StartTimeInSecSinceEpoch, DurationInSeconds) together: give one"
                    .into(),
            ));
        }
        (true, false) => Window::Steps {
            start: start_step,
            num_steps,
        },
        (false, true) => Window::Time {
            start: start_time,
            duration,
        },
        (false, false) => Window::Never,
    })
}

/// A sub-config's keys: from a string holding a Python dict literal (smdebug's `eval`), or from
/// an object.
fn sub_config<'a>(v: &Value, key: &str) -> Result<Keys<'a>, ProfilerError> {
    let map = match v {
        Value::String(s) => parse_dict(s).map_err(|reason| bad(key, Some(v), reason))?,
        Value::Object(map) => map.clone(),
        other => {
            return Err(bad(
                key,
                Some(other),
                format!(
                    "expected a string holding a dict (`\"{{\\\"StartStep\\\": 5}}\"`) or an \
                     object, found {}",
                    json_kind(other)
                ),
            ));
        }
    };
    Keys::owned(map, key)
}

/// An object's keys, looked up ignoring ASCII case (smdebug lowercases the whole file).
struct Keys<'a> {
    map: std::borrow::Cow<'a, Map<String, Value>>,
    /// Where the object is (`ProfilingParameters.DetailedProfilingConfig`), `""` at the top.
    context: String,
}

impl<'a> Keys<'a> {
    fn new(map: &'a Map<String, Value>, context: &str) -> Result<Keys<'a>, ProfilerError> {
        Keys::checked(std::borrow::Cow::Borrowed(map), context)
    }

    fn owned(map: Map<String, Value>, context: &str) -> Result<Keys<'a>, ProfilerError> {
        Keys::checked(std::borrow::Cow::Owned(map), context)
    }

    /// Two keys equal but for case would be one key in smdebug, the later winning: an error.
    fn checked(
        map: std::borrow::Cow<'a, Map<String, Value>>,
        context: &str,
    ) -> Result<Keys<'a>, ProfilerError> {
        let mut seen: Vec<&String> = Vec::with_capacity(map.len());
        for k in map.keys() {
            if let Some(first) = seen.iter().find(|s| s.eq_ignore_ascii_case(k)) {
                let at = if context.is_empty() {
                    k.clone()
                } else {
                    format!("{context}.{k}")
                };
                return Err(bad(
                    &at,
                    None,
                    format!("is given twice, as `{first}` and `{k}` (keys ignore case)"),
                ));
            }
            seen.push(k);
        }
        Ok(Keys {
            map,
            context: context.to_owned(),
        })
    }

    /// The value of `name` (any case), `None` when absent or `null`.
    fn get(&self, name: &str) -> Option<&Value> {
        self.get_or_null(name).filter(|v| !v.is_null())
    }

    /// The value of `name` (any case), `null` included.
    fn get_or_null(&self, name: &str) -> Option<&Value> {
        self.map
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// The keys `set` does not read (any case), each with why.
    fn unapplied(&self, set: &KeySet) -> Vec<UnappliedKey> {
        unapplied_keys(
            self.map.keys().map(String::as_str),
            &self.context,
            &set.clone().ignoring_case(),
        )
    }
}

fn bad(key: &str, value: Option<&Value>, reason: String) -> ProfilerError {
    ProfilerError::BadProfilerConfig {
        file: None,
        key: key.to_string(),
        value: value.map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }),
        reason,
    }
}

fn text(v: &Value, key: &str) -> Result<String, ProfilerError> {
    v.as_str().map(str::to_string).ok_or_else(|| {
        bad(
            key,
            Some(v),
            format!("expected a string, found {}", json_kind(v)),
        )
    })
}

/// A boolean, or a string or number saying one (`"true"`, `"False"`, `1`, `0`).
fn boolean(v: &Value, key: &str) -> Result<bool, ProfilerError> {
    let from_text = |s: &str| match s.trim().to_ascii_lowercase().as_str() {
        "true" | "1" => Some(true),
        "false" | "0" => Some(false),
        _ => None,
    };
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) => from_text(s),
        Value::Number(n) => from_text(&n.to_string()),
        _ => None,
    }
    .ok_or_else(|| bad(key, Some(v), "expected true or false".into()))
}

/// A number given as a number or a string.
fn number(v: &Value, key: &str) -> Result<f64, ProfilerError> {
    let n = match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    n.filter(|n| n.is_finite())
        .ok_or_else(|| bad(key, Some(v), "expected a number".into()))
}

/// A whole number at least 0 (`5`, `"5"`, `5.0`; smdebug truncates `5.5`, refused here).
fn whole(v: &Value, key: &str) -> Result<u64, ProfilerError> {
    if let Some(n) = v.as_u64() {
        return Ok(n);
    }
    if let Some(n) = v.as_str().and_then(|s| s.trim().parse::<u64>().ok()) {
        return Ok(n);
    }
    let n = number(v, key)?;
    if n < 0.0 || n.fract() != 0.0 || n >= u64::MAX as f64 {
        return Err(bad(
            key,
            Some(v),
            "expected a whole number, at least 0".into(),
        ));
    }
    Ok(n as u64)
}

/// Seconds, at least 0, finite (`0.5`, `"60"`).
fn seconds(v: &Value, key: &str) -> Result<Duration, ProfilerError> {
    let n = number(v, key)?;
    Duration::try_from_secs_f64(n).map_err(|_| {
        bad(
            key,
            Some(v),
            "expected a number of seconds, at least 0".into(),
        )
    })
}
