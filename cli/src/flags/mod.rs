//! The command-line flags that several commands share, and the one place
//! each group becomes the library's options: the replay settings
//! (`replay`, shared by replay, check, bisect and diff) and the flags of
//! the regression commands (`regress`, check and bisect). The
//! configuration file's defaults for them are merged here too, and the
//! `RRSTORE_*` environment variables that set library behaviour are read
//! here (`env`) and passed on as options.

pub mod compile;
pub mod env;
pub mod regress;
pub mod replay;
