//! Byte sources for trace files: plain or gzip-compressed, read through a counting buffer.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use flate2::bufread::MultiGzDecoder;

use super::error::{KinetoError, Result};

/// Buffer size for both the file reader and the JSON-side counting buffer. Large enough that
/// refills are rare, small enough to keep memory bounded regardless of trace size.
const BUF_SIZE: usize = 256 * 1024;

/// A buffered reader that knows how many bytes it has handed out, so that a parse error can be
/// reported at a byte offset. It sits on top of the decompressor (if any) because the offset a
/// user can act on is the offset into the JSON text.
///
/// It also counts newlines per buffer refill: serde_json reports errors by line and column
/// but, after an error, still consumes a few closing bytes of the enclosing containers, so the
/// exact offset is rebuilt from the line/column via [`CountingReader::offset_of`].
pub(crate) struct CountingReader<R> {
    inner: R,
    buf: Box<[u8]>,
    pos: usize,
    filled: usize,
    /// Bytes handed out before the current buffer contents.
    before: u64,
    /// Newlines in the bytes before the current buffer contents.
    newlines_before: u64,
    /// Offset of the first byte after the last newline before the current buffer contents.
    line_start_before: u64,
}

impl<R: Read> CountingReader<R> {
    pub(crate) fn new(inner: R) -> Self {
        Self {
            inner,
            buf: vec![0; BUF_SIZE].into_boxed_slice(),
            pos: 0,
            filled: 0,
            before: 0,
            newlines_before: 0,
            line_start_before: 0,
        }
    }

    /// Bytes handed to the consumer so far.
    pub(crate) fn offset(&self) -> u64 {
        self.before + self.pos as u64
    }

    /// Byte offset of 1-based `line` / `column` as serde_json counts them (column = bytes of
    /// the line consumed so far). Falls back to [`Self::offset`] when the line started before
    /// the previous buffer refill, which only a pathological error position can cause.
    pub(crate) fn offset_of(&self, line: usize, column: usize) -> u64 {
        let Some(newlines) = (line as u64).checked_sub(1) else {
            return self.offset();
        };
        let start = if newlines == self.newlines_before {
            Some(self.line_start_before)
        } else if let Some(nth) = newlines.checked_sub(self.newlines_before + 1) {
            self.buf[..self.filled]
                .iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .nth(nth as usize)
                .map(|(i, _)| self.before + i as u64 + 1)
        } else {
            None
        };
        start.map_or_else(|| self.offset(), |s| s + column as u64)
    }

    fn refill(&mut self) -> io::Result<()> {
        let old = &self.buf[..self.filled];
        // Counting over the whole buffer vectorises; doing it per byte in `read` would not.
        self.newlines_before += old.iter().filter(|b| **b == b'\n').count() as u64;
        if let Some(i) = old.iter().rposition(|b| *b == b'\n') {
            self.line_start_before = self.before + i as u64 + 1;
        }
        self.before += self.filled as u64;
        self.pos = 0;
        self.filled = 0;
        self.filled = self.inner.read(&mut self.buf)?;
        Ok(())
    }
}

impl<R: Read> Read for CountingReader<R> {
    #[inline]
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.filled {
            self.refill()?;
        }
        // serde_json reads one byte at a time; keep that case cheap.
        if out.len() == 1 && self.pos < self.filled {
            out[0] = self.buf[self.pos];
            self.pos += 1;
            return Ok(1);
        }
        let n = out.len().min(self.filled - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// The opened byte stream of a trace file: gzip is recognised by its magic bytes, not by name.
pub(crate) enum TraceSource {
    /// Uncompressed JSON.
    Plain(BufReader<File>),
    /// gzip-compressed JSON (all gzip members are read, as `gzip -d` does).
    Gzip(Box<MultiGzDecoder<BufReader<File>>>),
}

impl TraceSource {
    pub(crate) fn open(path: &Path) -> Result<Self> {
        let open_err = |source| KinetoError::Open {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(open_err)?;
        let mut reader = BufReader::with_capacity(BUF_SIZE, file);
        let head = reader.fill_buf().map_err(open_err)?;
        if head.starts_with(&[0x1f, 0x8b]) {
            Ok(Self::Gzip(Box::new(MultiGzDecoder::new(reader))))
        } else {
            Ok(Self::Plain(reader))
        }
    }

    /// How error messages name the stream the byte offsets count.
    pub(crate) fn stream_name(&self) -> &'static str {
        match self {
            Self::Plain(_) => "JSON text",
            Self::Gzip(_) => "decompressed JSON text",
        }
    }
}
