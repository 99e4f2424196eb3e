//! 5. Rules summary.

use smdebug_rules::Status;

use crate::html::{Cell, table};
use crate::input::NoteArea;
use crate::rule_file::RuleFile;

use super::Page;
use super::format::json_fields;

impl Page<'_> {
    pub(super) fn rules_summary(&mut self) {
        self.notes(NoteArea::Rules);
        if self.rules.is_empty() {
            self.missing("No rule results were given to the report, so there is no rules summary. Run the profiler and debugging rules over the run and pass their results.");
            return;
        }
        let count = |status: Status| self.rules.iter().filter(|r| r.status == status).count();
        let (issues, no_data) = (count(Status::IssuesFound), count(Status::NoData));
        let mut lead = format!(
            "{} rule(s); {issues} found issues. Rules that found issues come first.",
            self.rules.len()
        );
        if no_data > 0 {
            lead.push_str(&format!(
                " {no_data} had no data to check (NoData, greyed, last): they checked nothing \
                 in this run, which is not a pass; the finding column says why."
            ));
        }
        self.lead(&lead);
        let mut rules: Vec<&RuleFile> = self.rules.iter().collect();
        rules.sort_by_key(|r| match r.status {
            Status::IssuesFound => 0,
            Status::Error => 1,
            Status::NoIssuesFound | Status::InProgress => 2,
            Status::NoData => 3,
        });
        let rows: Vec<Vec<Cell>> = rules
            .iter()
            .map(|r| {
                vec![
                    Cell::text(&r.name),
                    Cell::text(r.kind.kind()),
                    Cell::Status(r.status),
                    Cell::text(&r.message),
                    Cell::num(r.triggered.to_string()),
                    Cell::num(r.datapoints.to_string()),
                    Cell::text(&r.description),
                    Cell::text(&r.recommendation),
                    Cell::Fields(json_fields(&r.parameters)),
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
                "finding (or why nothing was checked)",
                "triggered",
                "datapoints",
                "description",
                "recommendation",
                "parameters",
            ],
            &rows,
        );
        // What of a status does not read (a summary written by another version) is said here,
        // whichever section would show it.
        let problems: Vec<String> = self
            .rules
            .iter()
            .flat_map(|r| r.problems.iter().cloned())
            .collect();
        for problem in problems {
            self.missing(&problem);
        }
    }
}
