#!/usr/bin/env bash
# Every test of the project: what the README's "all tests" command runs, and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step's header says how long the previous steps took, so a slow step shows in CI's log.
START=$SECONDS
step() { printf '\n==== [%ss] %s\n' "$((SECONDS - START))" "$*"; }

# CI builds, not working ones: no incremental caches, and no debug info beyond line tables
# (dev) or none (release, and bench, which must match release to share its build): with it,
# a release build of the tests took a fifth more CPU (1,002 s against 810 s).
export CARGO_INCREMENTAL=0 CARGO_PROFILE_DEV_DEBUG=line-tables-only \
  CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_BENCH_DEBUG=false

step "format"
cargo fmt --all -- --check

step "clippy"
# --all-features: the `tokio-io` and `futures-io` adapters of gort-net are linted too.
cargo clippy --workspace --all-targets --all-features -- -D warnings

# Every test binary is built and run once, in the profile where it finds most: the component
# crates' unit and integration tests (timer heap and statuses, run queues, channels, sockets,
# gort-net's tokio and futures adapters...) in debug, with debug assertions and overflow
# checks on the structures they test; the `gort` package's end-to-end tests (programs ported
# from Go and Tokio, abuse cases, Raft, hyper) in release, the speed real programs see, some of
# them release only. Building every test in both profiles took 12 of CI's 25 minutes.
# Examples are type-checked by clippy above (--all-targets) and run by the examples step.
step "tests (debug): the component crates"
cargo test --workspace --exclude gort --features gort-net/tokio-io,gort-net/futures-io \
  --lib --bins --tests

# Doc tests run once, in debug: each is its own binary (edition 2021), and an optimised build
# of ~260 of them finds nothing a debug one misses.
step "doc tests"
cargo test --workspace --doc

step "tests (release): the gort package's end-to-end tests"
cargo test -p gort --release --tests

step "loom models"
# Every crates/*/tests/loom_*.rs, in release with a bounded number of preemptions (tokio's and
# crossbeam's habit); each is a few seconds once built.
for f in crates/*/tests/loom_*.rs; do
  crate=gort-$(basename "$(dirname "$(dirname "$f")")")
  RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom \
    cargo test --release -p "$crate" --test "$(basename "$f" .rs)"
done

step "stress suite (short)"
cargo run --release -p gort-stress -- --duration 5s

step "soak (short): a server's mixed workload stays flat"
cargo run --release --example soak

step "examples (each checks its own result; hyper_server serves until killed: tests/hyper.rs runs it)"
examples=$(for f in examples/*.rs examples/*/main.rs; do
  [ -e "$f" ] || continue
  n=$(basename "$f" .rs); [ "$n" = main ] && n=$(basename "$(dirname "$f")")
  [ "$n" = hyper_server ] || echo "$n"
done)
# shellcheck disable=SC2046
cargo build --release --features tokio-io $(printf -- '--example %s ' $examples)
for e in $examples; do
  echo "-- $e"
  timeout 300 "target/release/examples/$e" > "target/example-$e.log" 2>&1 ||
    { echo "example $e failed:"; tail -40 "target/example-$e.log"; exit 1; }
done

step "docs"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps

step "bench smoke (quick shapes, gort vs tokio)"
cargo bench --bench shapes -- --quick

step "done"
