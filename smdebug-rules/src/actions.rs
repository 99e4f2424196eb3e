//! What to do when a rule fires: stop training, call a webhook, send an e-mail, run a command.
//!
//! Actions are opt-in per rule. By default they run once per rule, when it first fires; a
//! webhook, e-mail or command with `"on": "status_change"` runs at every change of the rule's
//! status instead (`InProgress` → `IssuesFound` → …, the verdict at the end included), told the
//! old and the new status, as SageMaker's status-change events are. A failing action (server
//! down, command exits non-zero) is recorded in the rule's status; it never stops the runner.
//!
//! `stop_training` and `command` are always there. `webhook` and `email` bring in an HTTP
//! client and a mail stack (each with TLS), so they are cargo features of smdebug-rules, off by
//! default: `webhook`, `email`, or `notify` for both. `sns` (feature `sns`, the AWS SDK for
//! Rust) is SageMaker's e-mail and SMS notification: an Amazon SNS topic (`SMDebugRules` unless
//! named) is created or reused, the address or phone number subscribed once, and the finding
//! published to it, as smdebug's `MessageAction` does. A rule spec with an action whose feature
//! this build leaves out is refused when the runner is built ([`ActionConfig::validate`]), with
//! the feature to enable in the message.
//!
//! In JSON (inside a rule spec's `actions`):
//!
//! ```json
//! [{"type": "stop_training"},
//!  {"type": "webhook", "url": "https://hooks.slack.com/services/…"},
//!  {"type": "email", "smtp_host": "smtp.example.com", "smtp_port": 587, "tls": "starttls",
//!   "username": "bot", "password_env": "SMTP_PASSWORD",
//!   "from": "smdebug@example.com", "to": ["me@example.com"]},
//!  {"type": "command", "program": "notify-send", "args": ["smdebug"]},
//!  {"type": "webhook", "url": "http://127.0.0.1:8080/status", "on": "status_change"},
//!  {"type": "sns", "protocol": "sms", "endpoint": "+15555550123"}]
//! ```

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use smdebug_core::StopSignal;
use smdebug_storage::Storage;

use crate::error::{Error, Result};
use crate::evidence::Evidence;
use crate::state::Status;
use smdebug_format::stop::StopRequest;
use smdebug_io::stop::request_stop;

#[cfg(feature = "sns")]
mod sns;

fn default_timeout() -> f64 {
    10.0
}

/// How the SMTP connection is secured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SmtpTls {
    /// Plain text (a local relay, a test server).
    None,
    /// Plain connection upgraded with STARTTLS (port 587). Default.
    #[default]
    Starttls,
    /// TLS from the first byte (port 465).
    Tls,
}

/// How an SNS action reaches its person: the subscription's protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SnsProtocol {
    /// An e-mail address (SNS sends a confirmation first).
    Email,
    /// A phone number in E.164 form (`+15555550123`).
    Sms,
}

impl SnsProtocol {
    /// The protocol's name in SNS: `email`, `sms`.
    pub fn name(self) -> &'static str {
        match self {
            SnsProtocol::Email => "email",
            SnsProtocol::Sms => "sms",
        }
    }

    /// The filter policy's and message attribute's key smdebug uses for the protocol.
    pub fn attribute(self) -> &'static str {
        match self {
            SnsProtocol::Email => "email",
            SnsProtocol::Sms => "phone_num",
        }
    }
}

/// smdebug's topic for rule notifications.
pub const SNS_TOPIC: &str = "SMDebugRules";

fn default_topic() -> String {
    SNS_TOPIC.to_string()
}

/// When a notifying action (webhook, e-mail, command, SNS) is carried out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// Once, when the rule first fires. Default.
    #[default]
    FirstFiring,
    /// At every change of the rule's status, with the old and the new one: the firing
    /// (`InProgress` → `IssuesFound`), the verdict when the run ends (`InProgress` →
    /// `NoIssuesFound`), a failure (→ `Error`).
    StatusChange,
}

impl Trigger {
    fn is_default(&self) -> bool {
        *self == Trigger::FirstFiring
    }
}

/// One action, as configured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ActionConfig {
    /// Asks the training job to stop: writes the run's stop request (seen by a
    /// [`StopWatcher`](smdebug_io::stop::StopWatcher)) and sets the runner's in-process
    /// [`StopSignal`] if it has one.
    StopTraining,
    /// POSTs Slack-compatible JSON (`{"text": …}` plus an `smdebug` object with the details).
    Webhook {
        /// The address to POST to.
        url: String,
        /// Seconds. Default 10.
        #[serde(default = "default_timeout")]
        timeout_s: f64,
        /// When it is sent. Default: at the first firing.
        #[serde(default, skip_serializing_if = "Trigger::is_default")]
        on: Trigger,
    },
    /// Sends a plain-text e-mail over SMTP.
    Email {
        /// The SMTP server.
        smtp_host: String,
        /// Default: 25 without TLS, 587 with STARTTLS, 465 with TLS.
        #[serde(default)]
        smtp_port: Option<u16>,
        /// How the connection is encrypted. Default: none.
        #[serde(default)]
        tls: SmtpTls,
        /// The SMTP login, if the server wants one.
        #[serde(default)]
        username: Option<String>,
        /// The password itself; prefer `password_env`.
        #[serde(default)]
        password: Option<String>,
        /// The environment variable holding the password.
        #[serde(default)]
        password_env: Option<String>,
        /// The sender address.
        from: String,
        /// The recipient addresses.
        to: Vec<String>,
        /// Seconds. Default 10.
        #[serde(default = "default_timeout")]
        timeout_s: f64,
        /// When it is sent. Default: at the first firing.
        #[serde(default, skip_serializing_if = "Trigger::is_default")]
        on: Trigger,
    },
    /// Publishes the finding to an Amazon SNS topic with an e-mail or SMS subscription
    /// (SageMaker Debugger's `Email` and `SMS` actions). The topic is created when missing and
    /// reused when there; the endpoint is subscribed once (with smdebug's filter policy, so a
    /// topic shared by several people sends each only their own). Credentials and region come
    /// from the environment as for the AWS CLI (`AWS_REGION`, else `us-east-1` as smdebug).
    /// Feature `sns`.
    Sns {
        /// `email` or `sms`.
        protocol: SnsProtocol,
        /// The e-mail address or phone number (E.164: `+15555550123`).
        endpoint: String,
        /// The topic's name. Default `SMDebugRules` (smdebug's).
        #[serde(default = "default_topic")]
        topic: String,
        /// The region. Default: `AWS_REGION`, `AWS_DEFAULT_REGION`, else `us-east-1`.
        #[serde(default)]
        region: Option<String>,
        /// Another SNS endpoint than AWS's (a local one such as moto's). Default: the
        /// environment's (`AWS_ENDPOINT_URL_SNS`, `AWS_ENDPOINT_URL`), else AWS.
        #[serde(default)]
        endpoint_url: Option<String>,
        /// Seconds for each request. Default 10.
        #[serde(default = "default_timeout")]
        timeout_s: f64,
        /// When it is sent. Default: at the first firing.
        #[serde(default, skip_serializing_if = "Trigger::is_default")]
        on: Trigger,
    },
    /// Runs a program (no shell) with the event in `SMDEBUG_*` environment variables and as JSON
    /// on its standard input. A non-zero exit or a timeout is a failure.
    Command {
        /// The program to run (found on `PATH` when not a path).
        program: String,
        /// Its arguments. Default: none.
        #[serde(default)]
        args: Vec<String>,
        /// Seconds. Default 10.
        #[serde(default = "default_timeout")]
        timeout_s: f64,
        /// When it runs. Default: at the first firing.
        #[serde(default, skip_serializing_if = "Trigger::is_default")]
        on: Trigger,
    },
}

impl ActionConfig {
    /// The action's type name (`stop_training`, `webhook`, `email`, `command`).
    pub fn kind(&self) -> &'static str {
        match self {
            ActionConfig::StopTraining => "stop_training",
            ActionConfig::Webhook { .. } => "webhook",
            ActionConfig::Email { .. } => "email",
            ActionConfig::Command { .. } => "command",
            ActionConfig::Sns { .. } => "sns",
        }
    }

    /// An SNS e-mail action with smdebug's defaults (SageMaker's `Email(address)`).
    pub fn sns_email(address: impl Into<String>) -> ActionConfig {
        ActionConfig::sns(SnsProtocol::Email, address.into())
    }

    /// An SNS SMS action with smdebug's defaults (SageMaker's `SMS(phone_number)`).
    pub fn sms(phone_number: impl Into<String>) -> ActionConfig {
        ActionConfig::sns(SnsProtocol::Sms, phone_number.into())
    }

    fn sns(protocol: SnsProtocol, endpoint: String) -> ActionConfig {
        ActionConfig::Sns {
            protocol,
            endpoint,
            topic: default_topic(),
            region: None,
            endpoint_url: None,
            timeout_s: default_timeout(),
            on: Trigger::FirstFiring,
        }
    }

    /// When the action is carried out (`stop_training`: at the first firing, always).
    pub fn trigger(&self) -> Trigger {
        match self {
            ActionConfig::StopTraining => Trigger::FirstFiring,
            ActionConfig::Webhook { on, .. }
            | ActionConfig::Email { on, .. }
            | ActionConfig::Command { on, .. }
            | ActionConfig::Sns { on, .. } => *on,
        }
    }

    /// The smdebug-rules cargo feature this action needs (`webhook`, `email`), `None` for the
    /// actions that are always there.
    pub fn required_feature(&self) -> Option<&'static str> {
        match self {
            ActionConfig::Webhook { .. } => Some("webhook"),
            ActionConfig::Email { .. } => Some("email"),
            ActionConfig::Sns { .. } => Some("sns"),
            ActionConfig::StopTraining | ActionConfig::Command { .. } => None,
        }
    }

    /// Whether this build can carry the action out (its feature, if any, is compiled in).
    pub fn is_compiled(&self) -> bool {
        match self {
            ActionConfig::Webhook { .. } => cfg!(feature = "webhook"),
            ActionConfig::Email { .. } => cfg!(feature = "email"),
            ActionConfig::Sns { .. } => cfg!(feature = "sns"),
            ActionConfig::StopTraining | ActionConfig::Command { .. } => true,
        }
    }

    /// Checks what can be checked before anything fires (the action is compiled in, addresses
    /// parse, URL scheme, …).
    pub fn validate(&self) -> Result<()> {
        let bad = |reason: String| Error::BadAction {
            action: self.kind().into(),
            reason,
        };
        if let Some(feature) = self.required_feature()
            && !self.is_compiled()
        {
            return Err(Error::ActionNotCompiled {
                action: self.kind().into(),
                feature,
            });
        }
        match self {
            ActionConfig::StopTraining => Ok(()),
            ActionConfig::Webhook { url, .. } => {
                if url.starts_with("http://") || url.starts_with("https://") {
                    Ok(())
                } else {
                    Err(bad(format!("`{url}` is not an http(s) URL")))
                }
            }
            ActionConfig::Email { from, to, .. } => {
                if to.is_empty() {
                    return Err(bad("no recipients (`to`)".into()));
                }
                #[cfg(feature = "email")]
                for a in std::iter::once(from).chain(to) {
                    a.parse::<lettre::message::Mailbox>()
                        .map_err(|e| bad(format!("address `{a}`: {e}")))?;
                }
                #[cfg(not(feature = "email"))]
                let _ = from;
                Ok(())
            }
            ActionConfig::Sns {
                protocol,
                endpoint,
                topic,
                ..
            } => {
                let topic_ok = !topic.is_empty()
                    && topic.len() <= 256
                    && topic
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
                if !topic_ok {
                    return Err(bad(format!(
                        "topic `{topic}`: 1 to 256 letters, digits, `-` or `_`"
                    )));
                }
                match protocol {
                    SnsProtocol::Sms => {
                        let digits = endpoint.strip_prefix('+').unwrap_or_default();
                        if digits.is_empty()
                            || digits.len() > 15
                            || !digits.chars().all(|c| c.is_ascii_digit())
                        {
                            return Err(bad(format!(
                                "`{endpoint}` is not a phone number in E.164 form (`+15555550123`)"
                            )));
                        }
                    }
                    SnsProtocol::Email => {
                        let parts = endpoint.split_once('@');
                        if !parts.is_some_and(|(user, host)| {
                            !user.is_empty() && host.contains('.') && !endpoint.contains(' ')
                        }) {
                            return Err(bad(format!("`{endpoint}` is not an e-mail address")));
                        }
                    }
                }
                Ok(())
            }
            ActionConfig::Command { program, .. } => {
                if program.trim().is_empty() {
                    Err(bad("empty program".into()))
                } else {
                    Ok(())
                }
            }
        }
    }
}

/// What an action is told: a firing, or a change of the rule's status.
#[derive(Clone, Debug, Serialize)]
pub struct RuleEvent {
    /// The rule.
    pub rule: String,
    /// The run's location.
    pub run: String,
    /// The step it fired at; for a status change, the last step the rules had evaluated.
    pub step: u64,
    /// What it found (for a status change, the rule's message now).
    pub message: String,
    /// The measurements behind the finding.
    pub evidence: Vec<Evidence>,
    /// For an action triggered by a status change, the old and the new status; `None` for a
    /// firing.
    pub change: Option<StatusChange>,
}

/// A rule's status before and after a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusChange {
    /// The status it had.
    pub from: Status,
    /// The status it has now.
    pub to: Status,
}

impl RuleEvent {
    /// The SNS message and subject: smdebug's wording, with the evidence; the subject at most
    /// 100 printable ASCII characters, as SNS takes them.
    #[cfg(feature = "sns")]
    fn sns_message(&self) -> (String, String) {
        let mut body = self.summary_line();
        for e in &self.evidence {
            body.push_str(&format!(
                "\n  {} at step {}: {} = {}",
                e.tensor, e.step, e.measure, e.value
            ));
        }
        let subject: String = self
            .subject()
            .chars()
            .map(|c| {
                if c.is_ascii_graphic() || c == ' ' {
                    c
                } else {
                    '?'
                }
            })
            .take(100)
            .collect();
        (body, subject)
    }

    /// One line for people: `VanishingGradient fired at step 12 of /runs/a: …`, or for a
    /// status change `VanishingGradient: InProgress -> NoIssuesFound at step 570 of /runs/a: …`.
    pub fn summary_line(&self) -> String {
        match self.change {
            None => format!(
                "{} fired at step {} of {}: {}",
                self.rule, self.step, self.run, self.message
            ),
            Some(c) => format!(
                "{}: {} -> {} at step {} of {}{}",
                self.rule,
                c.from.name(),
                c.to.name(),
                self.step,
                self.run,
                if self.message.is_empty() {
                    String::new()
                } else {
                    format!(": {}", self.message)
                }
            ),
        }
    }

    /// The e-mail subject: `[smdebug] VanishingGradient fired at step 12`, or
    /// `[smdebug] VanishingGradient: InProgress -> NoIssuesFound`.
    pub fn subject(&self) -> String {
        match self.change {
            None => format!("[smdebug] {} fired at step {}", self.rule, self.step),
            Some(c) => format!(
                "[smdebug] {}: {} -> {}",
                self.rule,
                c.from.name(),
                c.to.name()
            ),
        }
    }
}

/// What actions need from the runner.
#[derive(Clone, Debug)]
pub struct ActionContext {
    /// The run's storage, for the stop request.
    pub storage: Arc<dyn Storage>,
    /// An in-process stop signal (a runner in the training process), if any.
    pub stop_signal: Option<StopSignal>,
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(if s.is_finite() && s > 0.0 { s } else { 10.0 })
}

/// Carries out one action for one event.
pub fn execute(action: &ActionConfig, event: &RuleEvent, ctx: &ActionContext) -> Result<()> {
    let fail = |reason: String| Error::Action {
        rule: event.rule.clone(),
        action: action.kind().into(),
        reason,
    };
    match action {
        ActionConfig::StopTraining => {
            let reason = event.summary_line();
            if let Some(signal) = &ctx.stop_signal {
                signal.request(smdebug_core::StopCause::by_rule(
                    reason.clone(),
                    event.rule.clone(),
                    event.step,
                ));
            }
            let mut req = StopRequest::new(reason);
            req.rule = Some(event.rule.clone());
            req.step = Some(event.step);
            // A request already there (another rule's, earlier) is the one the job stops
            // for; this rule's is not written over it.
            request_stop(ctx.storage.as_ref(), &req)
                .map(drop)
                .map_err(|e| fail(e.to_string()))
        }
        #[cfg(feature = "webhook")]
        ActionConfig::Webhook { url, timeout_s, .. } => {
            post_webhook(url, secs(*timeout_s), event).map_err(fail)
        }
        #[cfg(feature = "email")]
        ActionConfig::Email {
            smtp_host,
            smtp_port,
            tls,
            username,
            password,
            password_env,
            from,
            to,
            timeout_s,
            ..
        } => send_email(
            &EmailSettings {
                host: smtp_host,
                port: *smtp_port,
                tls: *tls,
                username: username.as_deref(),
                password: password.as_deref(),
                password_env: password_env.as_deref(),
                from,
                to,
                timeout: secs(*timeout_s),
            },
            event,
        )
        .map_err(fail),
        #[cfg(feature = "sns")]
        ActionConfig::Sns {
            protocol,
            endpoint,
            topic,
            region,
            endpoint_url,
            timeout_s,
            ..
        } => {
            let (body, subject) = event.sns_message();
            sns::notify(
                &sns::Target {
                    protocol: protocol.name(),
                    attribute: protocol.attribute(),
                    endpoint,
                    topic,
                    region: region.as_deref(),
                    endpoint_url: endpoint_url.as_deref(),
                    timeout: secs(*timeout_s),
                },
                &subject,
                &body,
            )
            .map_err(fail)
        }
        ActionConfig::Command {
            program,
            args,
            timeout_s,
            ..
        } => run_command(program, args, secs(*timeout_s), event).map_err(fail),
        #[cfg(not(all(feature = "webhook", feature = "email", feature = "sns")))]
        _ => Err(fail(
            Error::ActionNotCompiled {
                action: action.kind().into(),
                feature: action.required_feature().unwrap_or_default(),
            }
            .to_string(),
        )),
    }
}

#[cfg(feature = "webhook")]
fn post_webhook(
    url: &str,
    timeout: Duration,
    event: &RuleEvent,
) -> std::result::Result<(), String> {
    let body = serde_json::json!({
        "text": event.summary_line(),
        "smdebug": event,
    });
    let client = reqwest::blocking::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| format!("HTTP client: {e}"))?;
    let resp = client
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .map_err(|e| format!("POST {url}: {e}"))?;
    if resp.status().is_success() {
        Ok(())
    } else {
        let status = resp.status();
        let text = resp.text().unwrap_or_default();
        Err(format!(
            "POST {url}: HTTP {status}: {}",
            text.chars().take(200).collect::<String>()
        ))
    }
}

#[cfg(feature = "email")]
struct EmailSettings<'a> {
    host: &'a str,
    port: Option<u16>,
    tls: SmtpTls,
    username: Option<&'a str>,
    password: Option<&'a str>,
    password_env: Option<&'a str>,
    from: &'a str,
    to: &'a [String],
    timeout: Duration,
}

#[cfg(feature = "email")]
fn send_email(s: &EmailSettings<'_>, event: &RuleEvent) -> std::result::Result<(), String> {
    use lettre::message::{Mailbox, header::ContentType};
    use lettre::transport::smtp::authentication::Credentials;
    use lettre::{Message, SmtpTransport, Transport};

    let parse = |a: &str| {
        a.parse::<Mailbox>()
            .map_err(|e| format!("address `{a}`: {e}"))
    };
    let mut msg = Message::builder()
        .from(parse(s.from)?)
        .subject(event.subject());
    for t in s.to {
        msg = msg.to(parse(t)?);
    }
    let evidence: Vec<String> = event
        .evidence
        .iter()
        .map(|e| {
            format!(
                "  {} at step {}: {} = {}{}",
                e.tensor,
                e.step,
                e.measure,
                e.value,
                e.limit.map(|l| format!(" (limit {l})")).unwrap_or_default()
            )
        })
        .collect();
    let change = event
        .change
        .map(|c| format!("Status: {} -> {}\n", c.from.name(), c.to.name()))
        .unwrap_or_default();
    let body = format!(
        "{}\n\nRule: {}\nRun: {}\nStep: {}\n{change}\nEvidence:\n{}\n",
        event.message,
        event.rule,
        event.run,
        event.step,
        evidence.join("\n")
    );
    let email = msg
        .header(ContentType::TEXT_PLAIN)
        .body(body)
        .map_err(|e| format!("building the message: {e}"))?;
    let builder = match s.tls {
        SmtpTls::None => SmtpTransport::builder_dangerous(s.host).port(s.port.unwrap_or(25)),
        SmtpTls::Starttls => SmtpTransport::starttls_relay(s.host)
            .map_err(|e| format!("SMTP {}: {e}", s.host))?
            .port(s.port.unwrap_or(587)),
        SmtpTls::Tls => SmtpTransport::relay(s.host)
            .map_err(|e| format!("SMTP {}: {e}", s.host))?
            .port(s.port.unwrap_or(465)),
    };
    let password = match (s.password, s.password_env) {
        (Some(p), _) => Some(p.to_string()),
        (None, Some(var)) => {
            Some(std::env::var(var).map_err(|_| format!("environment variable {var} is not set"))?)
        }
        (None, None) => None,
    };
    let builder = match (s.username, password) {
        (Some(u), Some(p)) => builder.credentials(Credentials::new(u.to_string(), p)),
        (Some(_), None) => return Err("a username without a password".into()),
        _ => builder,
    };
    let transport = builder.timeout(Some(s.timeout)).build();
    transport
        .send(&email)
        .map(|_| ())
        .map_err(|e| format!("SMTP {}: {e}", s.host))
}

fn run_command(
    program: &str,
    args: &[String],
    timeout: Duration,
    event: &RuleEvent,
) -> std::result::Result<(), String> {
    let mut command = Command::new(program);
    command
        .args(args)
        .env("SMDEBUG_RULE", &event.rule)
        .env("SMDEBUG_STEP", event.step.to_string())
        .env("SMDEBUG_RUN", &event.run)
        .env("SMDEBUG_MESSAGE", &event.message);
    if let Some(c) = event.change {
        command
            .env("SMDEBUG_STATUS_FROM", c.from.name())
            .env("SMDEBUG_STATUS", c.to.name());
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run `{program}`: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        let json = serde_json::to_vec(event).unwrap_or_default();
        // A program that does not read its input closes the pipe; that is not a failure.
        let _ = std::io::Write::write_all(&mut stdin, &json);
    }
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                if status.success() {
                    return Ok(());
                }
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                return Err(format!(
                    "`{program}` exited with {status}: {}",
                    err.trim().chars().take(300).collect::<String>()
                ));
            }
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("`{program}` did not finish within {timeout:?}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("waiting for `{program}`: {e}")),
        }
    }
}
