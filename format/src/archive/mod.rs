//! The `.rra` single-file archive, version 1 (spec/FORMAT.md).
