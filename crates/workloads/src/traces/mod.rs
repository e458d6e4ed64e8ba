//! Block traces.
