//! Links the embedded interpreter: pyo3's build script leaves libpython to the extension
//! module's host here, so the library of the `python3` on PATH (or `PYO3_PYTHON`) is named
//! explicitly, with an rpath so the target runs without `LD_LIBRARY_PATH`.
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=PYO3_PYTHON");
    let python = std::env::var("PYO3_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let out = Command::new(&python)
        .args([
            "-c",
            "import sysconfig as s; print(s.get_config_var('LIBDIR')); print(s.get_config_var('LDVERSION'))",
        ])
        .output()
        .unwrap_or_else(|e| panic!("{python} could not be run: {e}"));
    let text = String::from_utf8(out.stdout).expect("sysconfig prints UTF-8");
    let mut lines = text.lines();
    let (Some(libdir), Some(version)) = (lines.next(), lines.next()) else {
        panic!("{python} printed no LIBDIR and LDVERSION: {text:?}");
    };
    println!("cargo:rustc-link-search=native={libdir}");
    println!("cargo:rustc-link-lib=dylib=python{version}");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{libdir}");
}
