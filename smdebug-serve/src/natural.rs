//! Names in the order people count them: `cpu2` before `cpu10` (heatmap rows, timelines, the span
//! list sorted by node).

use std::cmp::Ordering;

/// Names compared as people count: runs of digits by their value (`cpu2` < `cpu10`,
/// `algo-2` < `algo-10`), the rest character by character; equal values of different spelling
/// (`01`, `1`) by their text.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut x, mut y) = (a, b);
    loop {
        match (x.chars().next(), y.chars().next()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(c), Some(d)) if c.is_ascii_digit() && d.is_ascii_digit() => {
                let n = x.find(|c: char| !c.is_ascii_digit()).unwrap_or(x.len());
                let m = y.find(|c: char| !c.is_ascii_digit()).unwrap_or(y.len());
                let (p, q) = (
                    x[..n].trim_start_matches('0'),
                    y[..m].trim_start_matches('0'),
                );
                let by_value = p.len().cmp(&q.len()).then_with(|| p.cmp(q));
                if by_value != Ordering::Equal {
                    return by_value;
                }
                x = &x[n..];
                y = &y[m..];
            }
            (Some(c), Some(d)) => {
                if c != d {
                    return c.cmp(&d);
                }
                x = &x[c.len_utf8()..];
                y = &y[d.len_utf8()..];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::natural_cmp;

    #[test]
    fn names_sort_as_people_count() {
        let mut names = vec![
            "cpu10", "cpu2", "gpu1", "cpu0", "cpu1", "cpu01", "algo-10", "algo-2",
        ];
        names.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            names,
            [
                "algo-2", "algo-10", "cpu0", "cpu01", "cpu1", "cpu2", "cpu10", "gpu1"
            ]
        );
    }
}
