//! Why a record's payload is not the tensor a reader asked for.

/// Why a record's payload is not the tensor a reader asked for. Callers add the file and the
/// offset ([`DecodeError::at`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Not a tensor event as smdebug or TensorFlow write them; the reason.
    Malformed(String),
    /// The tensor's shape and dtype claim more bytes than the budget.
    TooLarge {
        /// The record's tag (tensor name).
        tag: String,
        /// What claims the size: the dtype and shape, or the record's length.
        detail: String,
        /// The size it claims, in bytes.
        claimed: u128,
        /// The reader's limit, in bytes.
        limit: u64,
    },
    /// No tensor value under the asked tag; the tags the summary holds.
    OtherTag {
        /// The tag asked for.
        wanted: String,
        /// The tags the record holds.
        found: Vec<String>,
    },
    /// Several tensor values where one was expected (the same tag twice, or several tags when
    /// none was asked for).
    Ambiguous {
        /// The tags the record holds.
        tags: Vec<String>,
    },
    /// A well-formed string tensor where numbers were asked for (XGBoost's hook writes its
    /// `trees/*` text columns as strings): `format::strings` decodes it.
    Strings {
        /// The record's tag (tensor name).
        tag: String,
    },
}

impl From<String> for DecodeError {
    fn from(reason: String) -> Self {
        DecodeError::Malformed(reason)
    }
}

impl From<&str> for DecodeError {
    fn from(reason: &str) -> Self {
        DecodeError::Malformed(reason.to_string())
    }
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Malformed(reason) => f.write_str(reason),
            DecodeError::TooLarge {
                tag,
                detail,
                claimed,
                limit,
            } => write!(
                f,
                "tensor `{tag}` ({detail}) claims {claimed} bytes, more than the limit of {limit}"
            ),
            DecodeError::OtherTag { wanted, found } => write!(
                f,
                "no tensor tagged `{wanted}`; the record holds {}",
                tag_list(found)
            ),
            DecodeError::Ambiguous { tags } => {
                write!(f, "several tensor values: {}", tag_list(tags))
            }
            DecodeError::Strings { tag } => {
                write!(f, "tensor `{tag}` holds strings, not numbers")
            }
        }
    }
}

fn tag_list(tags: &[String]) -> String {
    if tags.is_empty() {
        return "no tensor value".to_string();
    }
    tags.iter()
        .map(|t| format!("`{t}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl DecodeError {
    /// The crate error for this payload, the record at byte `offset` of `path`.
    pub fn at(self, path: &str, offset: u64) -> crate::error::Error {
        use crate::error::Error;
        let path = path.to_string();
        match self {
            DecodeError::TooLarge {
                tag,
                detail,
                claimed,
                limit,
            } => Error::TensorTooLarge {
                path,
                offset,
                tensor: tag,
                detail,
                claimed,
                limit,
            },
            DecodeError::OtherTag { wanted, found } => Error::WrongTensor {
                path,
                offset,
                expected: format!("`{wanted}`"),
                found: tag_list(&found),
            },
            DecodeError::Strings { tag } => Error::StringTensor {
                path,
                offset,
                tensor: tag,
            },
            other => Error::CorruptRecord {
                path,
                offset,
                reason: other.to_string(),
            },
        }
    }
}
