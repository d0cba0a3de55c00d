//! The terminal UI: a pure render of &Model plus UI state.
