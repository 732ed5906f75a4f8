//! Helpers shared by the top crate's integration tests (each test file is its own crate and
//! declares `mod support;`).

/// The message of a caught panic (`String` or `&str` payloads), or "" for any other payload.
pub fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}
