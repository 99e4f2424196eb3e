//! Debugging rules.

use smdebug_analysis::time::utc;
use smdebug_rules::RuleInput;

use crate::html::{Cell, table};
use crate::rule_file::RuleFile;

use super::Page;
use super::format::status_fields;

impl Page<'_> {
    pub(super) fn debugging_rules(&mut self) {
        let rules: Vec<RuleFile> = self
            .rules
            .iter()
            .filter(|r| r.kind == RuleInput::Tensors)
            .cloned()
            .collect();
        if rules.is_empty() {
            self.missing("No debugging-rule results were given (rules over the saved tensors, such as LossNotDecreasing or VanishingGradient).");
            return;
        }
        for r in &rules {
            let name = r.name.clone();
            self.verdict(&name);
        }
        let rows: Vec<Vec<Cell>> = rules
            .iter()
            .map(|r| {
                let fields = self.status(&r.name).map(status_fields).unwrap_or_default();
                vec![
                    Cell::text(&r.name),
                    Cell::Status(r.status),
                    Cell::text(&r.message),
                    Cell::num(r.triggered.to_string()),
                    Cell::num(r.first_fired_step.map_or("-".into(), |s| s.to_string())),
                    Cell::text(r.first_fired_time_us.map_or("-".into(), utc)),
                    Cell::Fields(fields),
                ]
            })
            .collect();
        table(
            &mut self.out,
            "debugging-rules",
            &[
                "rule",
                "status",
                "finding (or why nothing was checked)",
                "triggered",
                "first step",
                "first time",
                "details",
            ],
            &rows,
        );
    }
}
