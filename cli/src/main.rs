//! The `rrstore` command line: parses arguments, calls the libraries, prints.
fn main() {
    println!("rrstore {}", env!("CARGO_PKG_VERSION"));
}
