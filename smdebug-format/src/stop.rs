//! A stop request (`stop_request.json`): what a rule runner or the dashboard asks of a training
//! job, the limits a reader holds it to, and a reason made fit to show. smdebug-io writes it and
//! watches for it.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The longest stop reason kept, in characters; a longer one is cut (and says so).
pub const MAX_REASON_CHARS: usize = 1_000;

/// The largest stop-request file read: a bigger one is refused with an error naming its size.
pub const MAX_STOP_REQUEST_BYTES: u64 = 64 * 1024;

/// A stop reason fit to show and store: control characters (terminal escapes, line breaks)
/// become spaces, runs of spaces one, invisible characters (zero-width spaces and joiners, the
/// right-to-left and other direction overrides and isolates: Unicode's default-ignorable code
/// points) are dropped, and it is cut at [`MAX_REASON_CHARS`].
pub fn sanitize_reason(reason: &str) -> String {
    let mut out = String::with_capacity(reason.len().min(MAX_REASON_CHARS * 4));
    let mut kept = 0usize;
    let mut total = 0usize;
    // Leading spaces dropped (as if one came before), trailing ones at the end.
    let mut space = true;
    for c in reason.chars() {
        if is_invisible(c) {
            continue;
        }
        let c = if c.is_control() || c.is_whitespace() {
            ' '
        } else {
            c
        };
        if c == ' ' && space {
            continue;
        }
        space = c == ' ';
        total += 1;
        if kept < MAX_REASON_CHARS {
            out.push(c);
            kept += 1;
        }
    }
    if total > kept {
        out.push_str(&format!("… ({} more characters)", total - kept));
    } else if out.ends_with(' ') {
        out.pop();
    }
    out
}

/// Unicode's default-ignorable code points (`Default_Ignorable_Code_Point` in Unicode 15's
/// `DerivedCoreProperties.txt`): characters drawn as nothing, among them the zero-width space,
/// joiners and marks, the bidirectional embeddings, overrides and isolates (U+202A..U+202E,
/// U+2066..U+2069), which can make a reason read backwards or hide a part of it.
fn is_invisible(c: char) -> bool {
    matches!(
        u32::from(c),
        0xAD | 0x34F
            | 0x61C
            | 0x115F..=0x1160
            | 0x17B4..=0x17B5
            | 0x180B..=0x180F
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x206F
            | 0x3164
            | 0xFE00..=0xFE0F
            | 0xFEFF
            | 0xFFA0
            | 0xFFF0..=0xFFF8
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0000..=0xE0FFF
    )
}

/// What a stop request says.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StopRequest {
    /// Why the job should stop; it ends up in the run's end marker.
    pub reason: String,
    /// The rule that asked, if a rule did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The step at which it fired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    /// When the request was written, seconds since the Unix epoch.
    #[serde(default)]
    pub requested_at: f64,
}

impl StopRequest {
    /// A request with a reason (made fit to show: see [`sanitize_reason`]), stamped now.
    pub fn new(reason: impl Into<String>) -> Self {
        StopRequest {
            reason: sanitize_reason(&reason.into()),
            rule: None,
            step: None,
            requested_at: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
        }
    }

    /// The request in a stop-request file, its reason and rule made fit to show
    /// ([`sanitize_reason`]); serde's error when the bytes are not one (not JSON, a field of
    /// the wrong type, empty).
    pub fn decode(bytes: &[u8]) -> Result<StopRequest, serde_json::Error> {
        let mut request: StopRequest = serde_json::from_slice(bytes)?;
        request.reason = sanitize_reason(&request.reason);
        request.rule = request.rule.as_deref().map(sanitize_reason);
        Ok(request)
    }

    /// The file's bytes: the request as pretty JSON.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).expect("a stop request serializes")
    }
}
