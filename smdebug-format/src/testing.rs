//! Test support for this and other crates' tests (the `testing` feature).

/// A one-pass reader held to the general reader it stands in for, on damaged copies of `bytes`:
/// every truncation, every change of one byte to each of `changes`, and every copy with one byte
/// taken out. Whenever `fast` reads a copy, `general` must read it alike (`fast` may leave any
/// copy to the general reader by answering `None`). Returns how many copies `fast` read.
pub fn agrees_under_damage<T: PartialEq + std::fmt::Debug>(
    bytes: &[u8],
    changes: &[u8],
    fast: impl Fn(&[u8]) -> Option<T>,
    general: impl Fn(&[u8]) -> Option<T>,
) -> usize {
    let mut read = 0;
    let mut check = |copy: &[u8]| {
        if let Some(got) = fast(copy) {
            assert_eq!(
                Some(&got),
                general(copy).as_ref(),
                "{}",
                String::from_utf8_lossy(copy)
            );
            read += 1;
        }
    };
    for cut in 0..bytes.len() {
        check(&bytes[..cut]);
    }
    for at in 0..bytes.len() {
        for &byte in changes {
            let mut copy = bytes.to_vec();
            copy[at] = byte;
            check(&copy);
        }
        let mut copy = bytes.to_vec();
        copy.remove(at);
        check(&copy);
    }
    read
}
