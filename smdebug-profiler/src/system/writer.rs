//! Rotating writer of system-metrics files.
//!
//! A file covers one window of `rotation` seconds aligned to the epoch (the SageMaker layout
//! names a file after the start of its window). The open file is kept in memory and published
//! whole, atomically, every `publish_interval` and when its window ends, so it can be read
//! while it grows and a reader never sees a partial line.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use smdebug_storage::Storage;

use super::error::Result;
use smdebug_format::system::{SystemSample, system_file_key};

struct OpenFile {
    window_start: u64,
    key: String,
    text: Vec<u8>,
    dirty: bool,
    last_publish: Instant,
    /// Records in `text`.
    records: u64,
    /// Records in the last publication storage acknowledged.
    stored: u64,
}

/// Accumulates records into the current window's file and publishes it.
pub(crate) struct SystemFileWriter {
    storage: Arc<dyn Storage>,
    node: String,
    rotation_s: u64,
    publish_interval: Duration,
    current: Option<OpenFile>,
    pub(crate) publications: u64,
    pub(crate) files_started: u64,
    /// Records in publications storage acknowledged.
    pub(crate) records_written: u64,
    /// Records of ended windows whose last publication failed: not stored.
    pub(crate) records_lost: u64,
}

impl SystemFileWriter {
    pub(crate) fn new(
        storage: Arc<dyn Storage>,
        node: String,
        rotation: Duration,
        publish_interval: Duration,
    ) -> Self {
        Self {
            storage,
            node,
            rotation_s: rotation.as_secs().max(1),
            publish_interval,
            current: None,
            publications: 0,
            files_started: 0,
            records_written: 0,
            records_lost: 0,
        }
    }

    /// Adds the records of one sample taken at `timestamp` (seconds since the epoch).
    pub(crate) fn append(&mut self, timestamp: f64, records: &[SystemSample]) -> Result<()> {
        let window_start = (timestamp.max(0.0) as u64 / self.rotation_s) * self.rotation_s;
        let mut outcome = Ok(());
        if self
            .current
            .as_ref()
            .is_some_and(|f| f.window_start != window_start)
        {
            // The window ended: its file is final. A failure is reported, but the new window's
            // records still go on.
            outcome = self.publish_current();
            self.records_lost += self.unstored();
            self.current = None;
        }
        if self.current.is_none() {
            self.files_started += 1;
        }
        let node = &self.node;
        let file = self.current.get_or_insert_with(|| OpenFile {
            window_start,
            key: system_file_key(window_start, node),
            text: Vec::new(),
            dirty: false,
            last_publish: Instant::now(),
            records: 0,
            stored: 0,
        });
        for record in records {
            // Serializing plain strings and finite floats cannot fail; a non-finite value
            // would become `null`, which smdebug's readers cannot use, so it is left out.
            if !record.value.is_finite() {
                continue;
            }
            if let Ok(line) = serde_json::to_vec(record) {
                file.text.extend_from_slice(&line);
                file.text.push(b'\n');
                file.dirty = true;
                file.records += 1;
            }
        }
        if file.last_publish.elapsed() >= self.publish_interval {
            outcome = outcome.and(self.publish_current());
        }
        outcome
    }

    /// Publishes the open file if it changed since its last publication.
    pub(crate) fn publish_current(&mut self) -> Result<()> {
        let Some(file) = self.current.as_mut() else {
            return Ok(());
        };
        file.last_publish = Instant::now();
        if !file.dirty {
            return Ok(());
        }
        // The open file keeps growing after this publication, so the store gets a copy.
        self.storage
            .put(&file.key, Bytes::copy_from_slice(&file.text))?;
        file.dirty = false;
        self.records_written += file.records - file.stored;
        file.stored = file.records;
        self.publications += 1;
        Ok(())
    }

    /// Records of the open file not in any publication storage acknowledged.
    pub(crate) fn unstored(&self) -> u64 {
        self.current.as_ref().map_or(0, |f| f.records - f.stored)
    }
}
