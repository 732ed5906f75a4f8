//! Machine-readable results (`--json`).

use super::SuiteResult;

/// The whole run as pretty-printed JSON.
pub fn render(suite: &SuiteResult) -> String {
    serde_json::to_string_pretty(suite).expect("results contain only serialisable data")
}

/// The whole run as one line of JSON (`--repeat`: one line per run).
pub fn render_line(suite: &SuiteResult) -> String {
    serde_json::to_string(suite).expect("results contain only serialisable data")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::sample;

    #[test]
    fn json_round_trips_the_key_fields() {
        let suite = SuiteResult::new(
            9,
            2,
            5_000,
            Some("drop-fire".into()),
            vec![sample("timer-storm", &["v"])],
        );
        let v: serde_json::Value = serde_json::from_str(&render(&suite)).unwrap();
        assert_eq!(v["seed"], 9);
        assert_eq!(v["passed"], false);
        assert_eq!(v["fault"], "drop-fire");
        let s = &v["scenarios"][0];
        assert_eq!(s["name"], "timer-storm");
        assert_eq!(s["timers"]["started"], 1_000_000);
        assert_eq!(s["lateness"]["max_us"], 45_000);
        assert!(
            s["lateness"].get("buckets").is_none(),
            "buckets are for plots only"
        );
        assert_eq!(s["violations"][0], "v");
        assert!(s["timeline"].as_array().is_some_and(|a| !a.is_empty()));
    }
}
