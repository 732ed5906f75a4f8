//! Runs the `gort-stress` binary end to end: a short suite passes, an injected bookkeeping
//! fault is caught (exit 1, "violation", the seed to replay), and the outputs are well formed.

use std::process::Command;
use std::sync::Mutex;

/// The runs measure lateness: never two at once on the test machine.
static SERIAL: Mutex<()> = Mutex::new(());

/// Runs the binary; returns its exit code, stdout and stderr.
fn run(args: &[&str]) -> (i32, String, String) {
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let out = Command::new(env!("CARGO_BIN_EXE_gort-stress"))
        .args(args)
        .output()
        .expect("gort-stress runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

#[test]
fn short_suite_passes_and_prints_the_table() {
    let (code, out, err) = run(&["--duration", "3s", "--seed", "1"]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains("seed 1"),
        "the seed is printed at start: {err}"
    );
    for name in [
        "timer-storm",
        "ticker-churn",
        "after-func-storm",
        "sleep-fanout",
        "channel-mesh",
        "resize",
        "poller-wakeups",
        "blocking-handoffs",
        "faults",
        "coarse-load",
        "paused-clock",
        "context-trees",
        "rate-and-ticks",
        "task-sets",
    ] {
        assert!(
            out.lines().any(|l| l.starts_with(name)),
            "no table row for {name}:\n{out}"
        );
    }
    assert!(out.contains("PASS"), "{out}");
}

#[test]
fn injected_drop_fire_is_reported_and_fails() {
    let (code, out, err) = run(&[
        "--scenario",
        "timer-storm",
        "--duration",
        "1s",
        "--seed",
        "7",
        "--inject-fault",
        "drop-fire",
    ]);
    assert_eq!(code, 1, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("violation"), "{out}");
    assert!(
        err.contains("--seed 7"),
        "the seed to replay is printed: {err}"
    );
}

#[test]
fn json_and_html_outputs_are_well_formed() {
    let dir = std::env::temp_dir().join(format!("gort-stress-cli-{}", std::process::id()));
    let dir_s = dir.to_str().expect("utf-8 temp dir");
    let (code, out, err) = run(&[
        "-s",
        "poller-wakeups",
        "-s",
        "faults",
        "--duration",
        "600ms",
        "--seed",
        "3",
        "--json",
        "--report",
        dir_s,
    ]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("stdout is only JSON");
    assert_eq!(v["seed"], 3);
    assert_eq!(v["passed"], true);
    let names: Vec<&str> = v["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["poller-wakeups", "faults"]);
    for s in v["scenarios"].as_array().unwrap() {
        let notes: Vec<&str> = s["notes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        let load_notes = notes
            .iter()
            .filter(|n| n.starts_with("other processes used"))
            .count();
        assert_eq!(load_notes, 1, "the machine's load is noted once: {notes:?}");
    }
    assert!(
        err.contains("violations"),
        "the table goes to stderr with --json: {err}"
    );
    let page = std::fs::read_to_string(dir.join("index.html")).expect("report written");
    assert_eq!(page.matches("<svg").count(), 4);
    assert!(page.contains("commit <b>") && page.contains(" cores; CPU stolen"));
    assert!(page.contains("runtime: tasks stolen"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn list_and_usage_errors() {
    let (code, out, _) = run(&["--list"]);
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 15);
    let (code, _, err) = run(&["--scenario", "no-such-thing"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(&["--duration", "10"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn repeat_runs_the_selection_with_fresh_seeds_and_summarises() {
    let (code, out, err) = run(&[
        "--repeat",
        "2",
        "--scenario",
        "channel-mesh",
        "--duration",
        "1s",
    ]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let seeds: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("gort-stress: seed "))
        .collect();
    assert_eq!(seeds.len(), 2, "one seed line per run: {err}");
    assert_ne!(seeds[0], seeds[1], "each run has a fresh seed");
    assert_eq!(out.matches("PASS").count(), 2, "one table per run: {out}");
    assert!(
        out.contains("repeat: 2 run(s), 2 passed, 0 failed"),
        "{out}"
    );
    // The warned column counts the runs that warned; a run warns (and passes) when other
    // processes took the machine while its lateness went over the bound, so a loaded machine
    // may rightly make it 1/2 or 2/2: the row must count the runs whose table shows a warning.
    let warned = out
        .split("PASS: ")
        .take(2)
        .filter(|table| table.contains("warning   [channel-mesh]"))
        .count();
    let row = format!("{warned}/2");
    assert!(
        out.lines()
            .any(|l| l.starts_with("channel-mesh") && l.ends_with(&row)),
        "summary row for the scenario, {row} warned: {out}"
    );
}
