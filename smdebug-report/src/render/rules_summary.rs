//! 5. Rules summary.

use smdebug_rules::Status;

use crate::html::{Cell, table};
use crate::input::NoteArea;
use crate::rule_file::RuleFile;

use super::Page;

impl Page<'_> {
    pub(super) fn rules_summary(&mut self) {
        self.notes(NoteArea::Rules);
        if self.rules.is_empty() {
            self.missing("No rule results were given to the report, so there is no rules summary. Run the profiler and debugging rules over the run and pass their results.");
            return;
        }
        let issues = self
            .rules
            .iter()
            .filter(|r| r.status == Status::IssuesFound)
            .count();
        self.lead(&format!(
            "{} rule(s); {issues} found issues. Rules that found issues come first.",
            self.rules.len()
        ));
        let mut rules: Vec<&RuleFile> = self.rules.iter().collect();
        rules.sort_by_key(|r| r.status != Status::IssuesFound);
        let rows: Vec<Vec<Cell>> = rules
            .iter()
            .map(|r| {
                vec![
                    Cell::text(&r.name),
                    Cell::text(&r.kind),
                    Cell::text(r.status.name()),
                    Cell::num(r.triggered.to_string()),
                    Cell::num(r.datapoints.to_string()),
                    Cell::text(&r.description),
                    Cell::text(&r.recommendation),
                    Cell::Code(r.parameters.to_string()),
                ]
            })
            .collect();
        table(
            &mut self.out,
            "rules",
            &[
                "rule",
                "kind",
                "status",
                "triggered",
                "datapoints",
                "description",
                "recommendation",
                "parameters",
            ],
            &rows,
        );
    }
}
