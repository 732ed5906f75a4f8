//! `GORT_MAXPROCS` (Go's `GOMAXPROCS`) read by the default runtime.
//!
//! The environment is process-global and tests run in parallel threads, so each case runs in
//! a child process of this test binary with an environment of its own: the parent tests start
//! it with `--exact probe` (or `macro_probe`) and `PROBE` naming what to build; the probe
//! prints what it got.

use std::process::Command;

/// Tells the child which runtime `probe` builds.
const PROBE: &str = "GORT_MAXPROCS_TEST_PROBE";
/// The line of the child's output that carries its result.
const RESULT: &str = "PROBE-RESULT ";

/// In a child: builds a runtime the way `PROBE` says and prints its number of Ps, or the
/// kind of error building it failed with. Without `PROBE` (the parent's run) it does nothing.
#[test]
fn probe() {
    let Ok(kind) = std::env::var(PROBE) else {
        return;
    };
    let built = match kind.as_str() {
        "new" => gort::Runtime::new(),
        "builder" => gort::Builder::new().build(),
        "explicit" => gort::Builder::new().procs(3).build(),
        other => panic!("unknown probe {other}"),
    };
    match built {
        Ok(rt) => println!("{RESULT}Ok({})", rt.procs()),
        Err(e) => println!("{RESULT}Err({:?}) {e}", e.kind()),
    }
}

/// In a child, with `PROBE=macro`: prints the number of Ps of the runtime `#[gort::test]`
/// built (`#[gort::main]` has the same expansion, with a drop timeout).
#[gort::test]
async fn macro_probe() {
    if std::env::var(PROBE).as_deref() == Ok("macro") {
        println!("{RESULT}Ok({})", gort::Handle::current().procs());
    }
}

/// Runs `probe` in a child with `GORT_MAXPROCS` set to `value` (removed if `None`); returns
/// its result line.
fn run_probe(kind: &str, value: Option<&str>) -> String {
    let test = if kind == "macro" {
        "macro_probe"
    } else {
        "probe"
    };
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--nocapture", "--test-threads=1"]);
    cmd.env(PROBE, kind);
    match value {
        Some(v) => cmd.env("GORT_MAXPROCS", v),
        None => cmd.env_remove("GORT_MAXPROCS"),
    };
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed: {stdout}");
    let line = stdout.lines().find_map(|l| Some(l.split_once(RESULT)?.1));
    line.unwrap_or_else(|| panic!("no result in {stdout}"))
        .to_string()
}

fn cpus() -> usize {
    gort_sched::default_procs()
}

#[test]
fn the_default_runtime_takes_its_procs_from_gort_maxprocs() {
    for kind in ["new", "builder", "macro"] {
        assert_eq!(run_probe(kind, Some("5")), "Ok(5)", "{kind}");
        assert_eq!(run_probe(kind, Some("1")), "Ok(1)", "{kind}");
    }
    assert_eq!(run_probe("new", Some(" 7\n")), "Ok(7)");
}

#[test]
fn without_gort_maxprocs_or_with_it_empty_the_default_is_one_p_per_cpu() {
    let default = format!("Ok({})", cpus());
    assert_eq!(run_probe("new", None), default);
    assert_eq!(run_probe("new", Some("")), default);
    assert_eq!(run_probe("macro", None), default);
}

#[test]
fn an_explicit_procs_wins_over_gort_maxprocs_which_is_then_not_read() {
    assert_eq!(run_probe("explicit", Some("5")), "Ok(3)");
    assert_eq!(run_probe("explicit", Some("not a number")), "Ok(3)");
}

#[test]
fn a_gort_maxprocs_that_is_not_a_number_of_ps_fails_the_build() {
    let too_many = (gort::MAX_PROCS + 1).to_string();
    for bad in ["0", "-2", "four", "2.5", too_many.as_str()] {
        let got = run_probe("new", Some(bad));
        assert!(got.starts_with("Err(InvalidInput)"), "{bad:?}: {got}");
        assert!(got.contains("GORT_MAXPROCS"), "{bad:?}: {got}");
    }
}
