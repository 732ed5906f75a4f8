//! The `framed_rpc` example (the file itself, so the example is what is tested) on 1 and on
//! 4 Ps: a Tokio program on tokio-util's `Framed`, a `CancellationToken` and `tokio::sync`,
//! run on gort; it checks its own answers, panics and shutdown, and panics if one is wrong.
//! Builds without features: the root package's dev-dependency on gort-net enables `tokio-io`.

#[path = "../examples/framed_rpc.rs"]
#[allow(dead_code)] // the example's `main` is not used here
mod framed_rpc;

#[test]
fn the_framed_rpc_example_checks_out_on_one_and_four_ps() {
    framed_rpc::quiet_handler_panics();
    for procs in [1, 4] {
        let rt = gort::Builder::new().procs(procs).build().unwrap();
        let summary = rt.block_on(framed_rpc::run());
        assert!(summary.starts_with("framed_rpc: "), "{summary}");
    }
}
