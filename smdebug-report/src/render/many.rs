//! Tables over many devices (GPUs, cores): beyond a few dozen rows a table lists the rows that
//! matter most and counts the rest, so that a job with thousands of GPUs gets a page of a few
//! hundred kilobytes, not one row (or one pair) per device.

/// Rows a per-device table lists at most.
pub(super) const MAX_ROWS: usize = 48;

/// Devices an advice sentence names at most.
pub(super) const MAX_NAMED: usize = 8;

/// The `keep` rows of highest rank (`rank` larger first; ties keep their order), in their
/// original order, and how many were left out.
pub(super) fn top_rows<T>(rows: Vec<(f64, T)>, keep: usize) -> (Vec<T>, usize) {
    let total = rows.len();
    if total <= keep {
        return (rows.into_iter().map(|r| r.1).collect(), 0);
    }
    let mut ranked: Vec<(usize, f64)> = rows.iter().enumerate().map(|(i, r)| (i, r.0)).collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut kept: Vec<usize> = ranked.iter().take(keep).map(|r| r.0).collect();
    kept.sort_unstable();
    let mut kept = kept.into_iter().peekable();
    let out = rows
        .into_iter()
        .enumerate()
        .filter_map(|(i, r)| (kept.next_if_eq(&i).is_some()).then_some(r.1))
        .collect();
    (out, total - keep)
}

/// `names` joined for a sentence: at most [`MAX_NAMED`], then how many more.
pub(super) fn named(names: &[String]) -> String {
    let shown = names.iter().take(MAX_NAMED).cloned().collect::<Vec<_>>();
    let more = names.len().saturating_sub(MAX_NAMED);
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// Counts of `values` in 10 bands of `[0, 100]` as table rows `(band, count)`, empty bands left
/// out.
pub(super) fn percent_bands(values: impl Iterator<Item = f64>) -> Vec<(String, u64)> {
    let mut counts = [0u64; 10];
    for v in values.filter(|v| v.is_finite()) {
        counts[((v / 10.0).max(0.0) as usize).min(9)] += 1;
    }
    counts
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(b, n)| (format!("{}–{} %", b * 10, b * 10 + 10), *n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_highest_ranked_rows_are_kept_in_order() {
        let rows = vec![(1.0, "a"), (5.0, "b"), (3.0, "c"), (5.0, "d"), (0.0, "e")];
        assert_eq!(top_rows(rows.clone(), 3), (vec!["b", "c", "d"], 2));
        assert_eq!(top_rows(rows, 9).1, 0);
        let names: Vec<String> = (0..10).map(|i| format!("gpu{i}")).collect();
        assert!(named(&names).ends_with("gpu7 and 2 more"));
        assert_eq!(
            percent_bands([5.0, 100.0, 95.0, f64::NAN].into_iter()),
            vec![("0–10 %".to_owned(), 1), ("90–100 %".to_owned(), 2)]
        );
    }
}
