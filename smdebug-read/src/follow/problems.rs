//! Problems with a run's profiler data that a follower worked around: typed, so that a
//! consumer sorts them by kind of data without reading their text.

use std::fmt;
use std::path::PathBuf;

/// Which kind of profiler data a [`DataProblem`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DataArea {
    /// System metrics (`system/`).
    System,
    /// Framework spans (`framework/pevents/`).
    Spans,
    /// Code-profile windows (`framework/code/`).
    CodeProfiles,
    /// Kineto (PyTorch profiler) traces given by path.
    Traces,
}

impl DataArea {
    fn noun(self) -> &'static str {
        match self {
            DataArea::System => "system metrics",
            DataArea::Spans => "framework trace files",
            DataArea::CodeProfiles => "code profiles",
            DataArea::Traces => "Kineto traces",
        }
    }
}

/// One problem with the data, and what was left out because of it.
#[derive(Clone, Debug, PartialEq)]
pub enum DataProblem {
    /// A folder could not be listed: nothing of that kind was read in this poll.
    Unlisted {
        /// The kind of data.
        area: DataArea,
        /// The storage's error.
        message: String,
    },
    /// A file could not be read (it is tried again at the next poll).
    Unreadable {
        /// The kind of data.
        area: DataArea,
        /// The file's key.
        key: String,
        /// The storage's error.
        message: String,
    },
    /// Lines of a system-metrics file that are not records; the file's other lines are kept.
    BadLines {
        /// The file's key.
        key: String,
        /// How many bad lines this read found.
        count: usize,
        /// The first one's 1-based line number.
        first_line: usize,
        /// Why it is not a record.
        first_message: String,
    },
    /// A file that is not what its name says (a framework trace, a code-profile summary, a
    /// Kineto trace): the whole file is left out.
    BadFile {
        /// The kind of data.
        area: DataArea,
        /// The file's key or path.
        key: String,
        /// The parser's error (naming the file).
        message: String,
    },
}

impl DataProblem {
    /// The kind of data it is about.
    pub fn area(&self) -> DataArea {
        match self {
            DataProblem::BadLines { .. } => DataArea::System,
            DataProblem::Unlisted { area, .. }
            | DataProblem::Unreadable { area, .. }
            | DataProblem::BadFile { area, .. } => *area,
        }
    }

    /// Whether data could not be read at all (a listing or a read failed), as opposed to data
    /// that was read and found damaged.
    pub fn is_read_failure(&self) -> bool {
        matches!(
            self,
            DataProblem::Unlisted { .. } | DataProblem::Unreadable { .. }
        )
    }

    /// A Kineto trace that could not be summarized.
    pub(crate) fn kineto(path: &std::path::Path, error: impl fmt::Display) -> DataProblem {
        DataProblem::BadFile {
            area: DataArea::Traces,
            key: PathBuf::from(path).display().to_string(),
            message: error.to_string(),
        }
    }
}

impl fmt::Display for DataProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataProblem::Unlisted { area, message } => {
                write!(f, "cannot list the {}: {message}", area.noun())
            }
            DataProblem::Unreadable { key, message, .. } => {
                write!(f, "{key}: cannot be read ({message}); left out for now")
            }
            DataProblem::BadLines {
                key,
                count: 1,
                first_line,
                first_message,
            } => write!(
                f,
                "{key} line {first_line}: not a system-metrics record ({first_message}); line skipped"
            ),
            DataProblem::BadLines {
                key,
                count,
                first_line,
                first_message,
            } => write!(
                f,
                "{key}: {count} lines are not system-metrics records and were skipped (the first, \
                 line {first_line}: {first_message})"
            ),
            DataProblem::BadFile { area, message, .. } => {
                let what = match area {
                    DataArea::System | DataArea::Spans => "trace file skipped",
                    DataArea::CodeProfiles => "this code-profile window is left out",
                    DataArea::Traces => "this trace is left out",
                };
                write!(f, "{message}; {what}")
            }
        }
    }
}

/// At most this many problems are kept (the rest are counted).
pub const MAX_PROBLEMS: usize = 50;

/// The problems met so far: each one once, at most [`MAX_PROBLEMS`], the rest counted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DataProblems {
    list: Vec<DataProblem>,
    dropped: usize,
}

impl DataProblems {
    /// None yet.
    pub const fn new() -> DataProblems {
        DataProblems {
            list: Vec::new(),
            dropped: 0,
        }
    }

    /// Records `problem` unless it is already there; `true` when it is new.
    pub fn push(&mut self, problem: DataProblem) -> bool {
        if self.list.contains(&problem) {
            return false;
        }
        if self.list.len() < MAX_PROBLEMS {
            self.list.push(problem);
        } else {
            self.dropped += 1;
        }
        true
    }

    /// The problems kept, in the order they were met.
    pub fn list(&self) -> &[DataProblem] {
        &self.list
    }

    /// How many more were met than kept.
    pub fn dropped(&self) -> usize {
        self.dropped
    }

    /// Whether none was met.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// One line per problem, and one counting those left out.
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.list.iter().map(ToString::to_string).collect();
        if self.dropped > 0 {
            lines.push(format!("... and {} more data problems", self.dropped));
        }
        lines
    }
}
