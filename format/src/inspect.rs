//! Human and JSON descriptions of a recording (`rrstore inspect`).
