//! The READMEs' code, compiled as written: each `rust` block of the repository's README is a
//! doc test of this crate, built with the dependency line the README shows (this crate's only
//! dependency). A method behind a feature the line leaves out, or a snippet that drifted from
//! the API, fails here.

#![forbid(unsafe_code)]

#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct Readme;

#[cfg(test)]
mod tests {
    /// The README's `[dependencies]` line names the features this crate's manifest enables,
    /// no more and no fewer: the doc tests prove the line, not some other build.
    #[test]
    fn readme_dependency_line() {
        let readme = include_str!("../../../README.md");
        let manifest = include_str!("../Cargo.toml");
        let features = |text: &str, prefix: &str| -> Vec<String> {
            let line = text
                .lines()
                .find(|l| l.starts_with(prefix))
                .unwrap_or_else(|| panic!("no line starting with `{prefix}`"));
            let list = &line[line.find("features = [").expect("a features list") + 12..];
            let list = &list[..list.find(']').expect("a closing bracket")];
            let mut names: Vec<String> = list
                .split(',')
                .map(|f| f.trim().trim_matches('"').to_string())
                .filter(|f| !f.is_empty())
                .collect();
            names.sort();
            names
        };
        assert_eq!(
            features(readme, "smdebug = {"),
            features(manifest, "smdebug = { path"),
            "the README's dependency line and tests/readme/Cargo.toml disagree"
        );
    }
}
