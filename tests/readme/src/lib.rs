//! The READMEs' code, compiled as written: each `rust` block of the repository's README is a
//! doc test of this crate, built with the dependency line the README shows (this crate's only
//! dependency). A method behind a feature the line leaves out, or a snippet that drifted from
//! the API, fails here.

#![forbid(unsafe_code)]

#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct Readme;

#[cfg(all(doctest, feature = "candle"))]
#[doc = include_str!("../../../smdebug-candle/README.md")]
pub struct CandleReadme;

#[cfg(test)]
mod tests {
    /// The features of the first `smdebug = {` line starting with `prefix` in `text`, sorted.
    fn features(text: &str, prefix: &str) -> Vec<String> {
        let line = text
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line starting with `{prefix}`"));
        let list = &line[line.find("= [").expect("a features list") + 3..];
        let list = &list[..list.find(']').expect("a closing bracket")];
        let mut names: Vec<String> = list
            .split(',')
            .map(|f| {
                f.trim()
                    .trim_matches('"')
                    .trim_start_matches("smdebug/")
                    .to_string()
            })
            .filter(|f| !f.is_empty())
            .collect();
        names.sort();
        names
    }

    const MANIFEST: &str = include_str!("../Cargo.toml");

    /// The README's `[dependencies]` line names the features this crate's manifest enables,
    /// no more and no fewer: the doc tests prove the line, not some other build.
    #[test]
    fn readme_dependency_line() {
        assert_eq!(
            features(include_str!("../../../README.md"), "smdebug = {"),
            features(MANIFEST, "smdebug = { path"),
            "the README's dependency line and tests/readme/Cargo.toml disagree"
        );
    }

    /// Each adapter README's line is its feature of this crate (`candle = [...]`).
    #[test]
    fn adapter_readme_dependency_lines() {
        for (adapter, readme) in [
            ("candle", include_str!("../../../smdebug-candle/README.md")),
            ("burn", include_str!("../../../smdebug-burn/README.md")),
            ("tch", include_str!("../../../smdebug-tch/README.md")),
        ] {
            assert_eq!(
                features(readme, "smdebug = {"),
                features(MANIFEST, &format!("{adapter} = [")),
                "smdebug-{adapter}/README.md's dependency line and the `{adapter}` feature of \
                 tests/readme/Cargo.toml disagree"
            );
        }
    }
}
