//! Import and export of LLVM record-replay files, one module per generation.
