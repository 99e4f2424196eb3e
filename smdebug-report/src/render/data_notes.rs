//! Notes on missing or unreadable data.

use std::fmt::Write as _;

use crate::html::escape;

use super::Page;

impl Page<'_> {
    pub(super) fn data_notes(&mut self) {
        if self.input.notes.is_empty() {
            self.lead("Every source was read completely: nothing was missing or unreadable.");
            return;
        }
        self.lead("What was missing, unreadable or partial when this report was made.");
        self.out.push_str("<ul class=\"notes\">");
        let input = self.input;
        for n in &input.notes {
            let _ = write!(
                self.out,
                "<li><strong>{:?}</strong>: {}</li>",
                n.area,
                escape(&n.message)
            );
        }
        self.out.push_str("</ul>");
    }
}
