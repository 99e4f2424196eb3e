//! The report's HTML page in tests that compare two pages' parts.

/// The scalars section of a report page, its charts' running numbers left out (the sections
/// before it may draw different numbers of charts).
pub fn scalars_section(page: &str) -> String {
    let start = page
        .find("<section id=\"scalars\"")
        .expect("a scalars section");
    let end = start + page[start..].find("</section>").expect("its end");
    let mut section = &page[start..end];
    let mut out = String::new();
    while let Some(at) = section.find(" id=\"chart-") {
        out.push_str(&section[..at]);
        let rest = &section[at + " id=\"chart-".len()..];
        section = &rest[rest.find('"').expect("the id's end") + 1..];
    }
    out.push_str(section);
    out
}
