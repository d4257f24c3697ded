//! The OpenMP offload runtime libraries a host image needs: naming the one
//! the dynamic loader could not find, and the Debian package that ships it.

/// Which Debian package provides a runtime library an image needs.
pub fn package_hint(library: &str) -> String {
    let pkg = if library.starts_with("libomptarget.so.") {
        let major = library
            .trim_start_matches("libomptarget.so.")
            .split('.')
            .next()
            .unwrap_or("22");
        format!("liboffload-{major}")
    } else if library.starts_with("libomp.so") {
        "liboffload-22 (which depends on libomp5-19, the package that ships libomp.so.5)".into()
    } else if let Some(v) = library.strip_prefix("libLLVM.so.") {
        format!("libllvm{}", v.split('.').next().unwrap_or(v))
    } else {
        return format!("install the package that ships it (`apt-file search {library}`)");
    };
    format!("install it with `apt-get install -y {pkg}`")
}

/// The library a dynamic-loader error says it could not find, if any.
pub fn missing_library(dlerror: &str) -> Option<String> {
    let idx = dlerror.find(": cannot open shared object file")?;
    let before = &dlerror[..idx];
    let lib = before.rsplit(": ").next().unwrap_or(before).trim();
    (!lib.is_empty()).then(|| lib.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_missing_libraries_and_their_packages() {
        let e = "/proc/self/fd/5: libomptarget.so.22.1: cannot open shared object file: No such file or directory";
        assert_eq!(missing_library(e).as_deref(), Some("libomptarget.so.22.1"));
        assert!(package_hint("libomptarget.so.22.1").contains("liboffload-22"));
        assert!(package_hint("libomp.so.5").contains("libomp5-19"));
        assert!(package_hint("libLLVM.so.22.1").contains("libllvm22"));
        assert_eq!(missing_library("undefined symbol: foo"), None);
    }
}
