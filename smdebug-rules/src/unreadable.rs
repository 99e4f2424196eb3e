//! Records a rule could not read (a checksum that does not match, a record over the reader's
//! budget: [`smdebug_read::Error::is_unreadable_record`]), and how the runner keeps one such
//! record from ending a rule.
//!
//! While the runner invokes a debugging rule it collects ([`collecting`]): the reading
//! helpers of [`select`](crate::select) then treat an unreadable record as a tensor not saved
//! at that step (the rule judges that step with the other tensors, and every other step) and
//! hand it here, and the runner lists it in the rule's status. Called by hand, outside a
//! runner, the helpers return the failure as [`Error::Unreadable`] instead.

use std::cell::RefCell;

use smdebug_core::Mode;

use crate::error::Error;

/// One record a rule could not read.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct UnreadableRecord {
    /// The tensor's name.
    pub tensor: String,
    /// The step it was read at (a global step, or a step of `mode`).
    pub step: u64,
    /// The mode the step is counted in, `None` for a global step.
    pub mode: Option<Mode>,
    /// Why, naming the file and the byte offset.
    pub reason: String,
}

impl std::fmt::Display for UnreadableRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mode = match self.mode {
            Some(m) if m != Mode::Global => format!("{} ", m.name()),
            _ => String::new(),
        };
        write!(
            f,
            "`{}` at {mode}step {}: {}",
            self.tensor, self.step, self.reason
        )
    }
}

thread_local! {
    /// The records left out during the invocation under way, when the runner collects them.
    static COLLECTED: RefCell<Option<Vec<UnreadableRecord>>> = const { RefCell::new(None) };
}

/// Runs `f` (one invocation of a rule) with unreadable records left out and collected; returns
/// its result and the records left out.
pub(crate) fn collecting<T>(f: impl FnOnce() -> T) -> (T, Vec<UnreadableRecord>) {
    /// Ends the collection even when `f` unwinds.
    struct Collection(Option<Vec<UnreadableRecord>>);
    impl Drop for Collection {
        fn drop(&mut self) {
            let outer = self.0.take();
            COLLECTED.with(|c| *c.borrow_mut() = outer);
        }
    }
    // A collection inside another (a rule invoking a rule) keeps its own records.
    let outer = COLLECTED.with(|c| c.borrow_mut().replace(Vec::new()));
    let guard = Collection(outer);
    let out = f();
    let records = COLLECTED
        .with(|c| c.borrow_mut().take())
        .unwrap_or_default();
    drop(guard);
    (out, records)
}

/// A failed read of `tensor` at `step` (of `mode`) by `rule`. An unreadable record, while the
/// runner collects, is left out: `Ok(None)`, as for a tensor not saved there. Otherwise the
/// error: [`Error::Unreadable`] for an unreadable record, [`Error::Read`] for any other failure.
pub(crate) fn left_out<T>(
    rule: &str,
    tensor: &str,
    step: u64,
    mode: Option<Mode>,
    e: smdebug_read::Error,
) -> Result<Option<T>, Error> {
    if !e.is_unreadable_record() {
        return Err(Error::Read {
            rule: rule.to_string(),
            step,
            source: Box::new(e),
        });
    }
    let record = UnreadableRecord {
        tensor: tensor.to_string(),
        step,
        mode,
        reason: e.to_string(),
    };
    let kept = COLLECTED.with(|c| match c.borrow_mut().as_mut() {
        Some(records) => {
            // A rule may read one record several ways (a reduction, then the values): it is
            // one unreadable record.
            if !records.contains(&record) {
                records.push(record);
            }
            true
        }
        None => false,
    });
    if kept {
        return Ok(None);
    }
    Err(Error::Unreadable {
        rule: rule.to_string(),
        step,
        tensor: tensor.to_string(),
        source: Box::new(e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corrupt() -> smdebug_read::Error {
        smdebug_read::Error::Format(smdebug_format::Error::CorruptRecord {
            path: "events/000000000003/000000000003_worker_0.tfevents".into(),
            offset: 40,
            reason: "bad payload checksum".into(),
        })
    }

    #[test]
    fn an_unreadable_record_is_left_out_only_while_collecting() {
        let alone = left_out::<f64>("R", "fc1.weight", 3, None, corrupt());
        assert!(matches!(alone, Err(Error::Unreadable { step: 3, .. })));

        let (out, records) =
            collecting(|| left_out::<f64>("R", "fc1.weight", 3, Some(Mode::Train), corrupt()));
        assert!(matches!(out, Ok(None)));
        assert_eq!(records.len(), 1);
        // Read again in the same invocation: listed once.
        let (_, again) = collecting(|| {
            let _ = left_out::<f64>("R", "fc1.weight", 3, None, corrupt());
            left_out::<f64>("R", "fc1.weight", 3, None, corrupt())
        });
        assert_eq!(again.len(), 1);
        assert_eq!(
            records[0].to_string(),
            "`fc1.weight` at TRAIN step 3: events/000000000003/000000000003_worker_0.tfevents: \
             corrupt record at byte 40: bad payload checksum"
        );
        // Collection is over: the next failure is an error again.
        assert!(left_out::<f64>("R", "t", 4, None, corrupt()).is_err());
        // Other failures are never left out.
        let (out, records) = collecting(|| {
            left_out::<f64>(
                "R",
                "t",
                5,
                None,
                smdebug_read::Error::Timeout {
                    what: "the store".into(),
                    waited: std::time::Duration::from_secs(30),
                },
            )
        });
        assert!(matches!(out, Err(Error::Read { step: 5, .. })));
        assert!(records.is_empty());
    }
}
