// Command gortbench runs the shapes of SHAPES.md on the Go runtime (standard library only),
// printing the same figures as `cargo bench --bench shapes` so that benches/run.sh can
// merge them into one gort / Tokio / Go table.
//
//	go build -o /tmp/gortbench . && /tmp/gortbench [-shape T1,T3] [-quick] [-json] [FILTER...]
//
// Every shape runs in a child process (this binary re-executed with -child ID), so that
// peak RSS is per shape. GOMAXPROCS is W = the number of CPUs unless set in the environment.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// seed is the seed of every random draw (the Rust side uses the same one).
const seed uint64 = 0x5EED_0060_4723_0001

// figure is one metric value of a shape.
type figure struct {
	key   string
	value float64
}

// params are what every shape needs to know about the run.
type params struct {
	quick   bool
	workers int
}

// n is full in a full run and a tenth of it with -quick.
func (p params) n(full int) int {
	if p.quick {
		if full/10 < 1 {
			return 1
		}
		return full / 10
	}
	return full
}

// pick is full in a full run and quick with -quick.
func (p params) pick(full, quick int) int {
	if p.quick {
		return quick
	}
	return full
}

// split spreads n operations over the W workers: per worker, total actually run.
func (p params) split(n int) (int, int) {
	per := n / p.workers
	if per < 1 {
		per = 1
	}
	return per, per * p.workers
}

// shape is one workload of SHAPES.md; reps child runs are made and each figure is the
// median over them (3 for the sub-second shapes and T3_100k, 11 for T5, as on the Rust side).
// benches/run.sh runs the children through the Rust runner instead (--go), interleaved
// with gort's and Tokio's.
type shape struct {
	id, name, group string
	metrics         []string
	reps            int
	run             func(p params) []figure
}

var fanout = []string{"wall_ms", "cpu_ms", "late_p50_us", "late_p99_us", "late_max_us", "rss_mib"}
var ticks = []string{"late_p50_us", "late_p99_us", "late_max_us", "dropped"}
var coarseTicks = []string{"late_p50_us", "late_p99_us", "late_max_us", "received"}

var shapes = []shape{
	{"T1", "start_stop", "timer", []string{"per_op_ns"}, 3, t1StartStop},
	{"T2", "reset", "timer", []string{"per_op_ns"}, 3, t2Reset},
	{"T2_chan", "reset channel Timer", "timer", []string{"per_op_ns"}, 3, t2ResetChan},
	// T2_sleep: gort's and Tokio's Sleep::reset against Go's Timer.Reset (T2_chan's Go code).
	{"T2_sleep", "reset Sleep", "timer", []string{"per_op_ns"}, 3, t2ResetChan},
	{"T3_100k", "sleep_fanout 100k", "timer", fanout, 3, func(p params) []figure { return t3SleepFanout(p, p.n(100_000)) }},
	{"T3_1M", "sleep_fanout 1M", "timer", fanout, 1, func(p params) []figure { return t3SleepFanout(p, p.n(1_000_000)) }},
	{"T4", "after_func_storm", "timer", []string{"last_fired_ms", "cpu_ms", "late_p99_us"}, 1, t4AfterFuncStorm},
	{"T5_idle", "ticker_jitter idle", "timer", ticks, 11, func(p params) []figure { return t5TickerJitter(p, false) }},
	{"T5_busy", "ticker_jitter busy", "timer", ticks, 11, func(p params) []figure { return t5TickerJitter(p, true) }},
	{"T6", "timeout_rpc", "timer", []string{"per_op_ns"}, 3, t6TimeoutRPC},
	// T6_ctx: gort's context.with_timeout against Go's context.WithTimeout (T6's Go code).
	{"T6_ctx", "context_timeout", "timer", []string{"per_op_ns"}, 3, t6TimeoutRPC},
	{"T7", "mass_cancel", "timer", []string{"cpu_ms", "rss_mib", "fired"}, 1, t7MassCancel},
	{"T8", "simultaneous", "timer", []string{"last_p50_us", "last_max_us"}, 3, t8Simultaneous},
	{"T9", "reset_earlier", "timer", []string{"per_op_ns", "cpu_ms"}, 1, t9ResetEarlier},
	// T9_chan: gort's channel Timers against Go's NewTimer; rss_mib is added by every child.
	{"T9_chan", "reset_earlier channel Timers", "timer", []string{"per_op_ns", "cpu_ms", "rss_mib"}, 1, t9ResetEarlierChan},
	{"T10_1ms", "ticker_coarse 1ms slices", "timer", coarseTicks, 3, func(p params) []figure { return t10TickerCoarse(p, time.Millisecond) }},
	{"T10_10ms", "ticker_coarse 10ms slices", "timer", coarseTicks, 3, func(p params) []figure { return t10TickerCoarse(p, 10*time.Millisecond) }},
	{"R1", "spawn_many", "sched", []string{"per_task_ns"}, 3, r1SpawnMany},
	{"R2", "yield_many", "sched", []string{"per_yield_ns"}, 3, r2YieldMany},
	{"R3", "ping_pong", "sched", []string{"per_round_trip_ns"}, 3, r3PingPong},
	{"R4", "chained_spawn", "sched", []string{"per_spawn_ns"}, 3, r4ChainedSpawn},
	{"N1", "echo_pingpong", "net", []string{"per_round_trip_ns"}, 3, n1EchoPingPong},
	{"N2", "echo_fanin", "net", []string{"per_round_trip_ns", "cpu_ms"}, 3, func(p params) []figure { return echoFanin(p, false) }},
	{"N3", "accept_churn", "net", []string{"per_conn_ns", "fds_left"}, 3, n3AcceptChurn},
	{"N4", "deadline_echo", "net", []string{"per_round_trip_ns", "cpu_ms"}, 3, func(p params) []figure { return echoFanin(p, true) }},
	{"N5", "idle_deadlines", "net", []string{"late_p50_us", "late_p99_us", "late_max_us", "cpu_ms", "rss_mib", "timed_out"}, 1, n5IdleDeadlines},
	{"N6", "unix_fanin", "net", []string{"per_round_trip_ns", "cpu_ms"}, 3, n6UnixFanin},
}

// rng is SplitMix64, identical to benches/shapes/common.rs.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9E3779B97F4A7C15
	z := r.s
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

func (r *rng) below(n uint64) uint64 { return r.next() % n }

// durations draws count durations uniform in [lo, hi] from s (same sequence as Rust).
func durations(s uint64, count int, lo, hi time.Duration) []time.Duration {
	r := rng{s}
	span := uint64(hi-lo) + 1
	out := make([]time.Duration, count)
	for i := range out {
		out[i] = lo + time.Duration(r.below(span))
	}
	return out
}

// percentilesUs returns p50, p99 and max of nanosecond samples in µs (nearest rank).
func percentilesUs(ns []int64) [3]float64 {
	if len(ns) == 0 {
		return [3]float64{}
	}
	sort.Slice(ns, func(i, j int) bool { return ns[i] < ns[j] })
	at := func(q float64) float64 {
		return float64(ns[int(math.Round(float64(len(ns)-1)*q))]) / 1e3
	}
	return [3]float64{at(0.50), at(0.99), at(1.0)}
}

// late is how far after due the instant now is (0 if before).
func late(due, now time.Time) int64 {
	if d := now.Sub(due); d > 0 {
		return int64(d)
	}
	return 0
}

// rusage returns this process's user+system CPU time and ru_maxrss (KiB on Linux).
func rusage() (time.Duration, int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(ru.Utime) + tv(ru.Stime), int64(ru.Maxrss)
}

// meter holds a wall and a CPU clock started together.
type meter struct {
	wall time.Time
	cpu  time.Duration
}

func startMeter() meter {
	c, _ := rusage()
	return meter{time.Now(), c}
}

func (m meter) cpuSince() time.Duration {
	c, _ := rusage()
	return c - m.cpu
}

func (m meter) nsPer(ops int) float64 {
	return float64(time.Since(m.wall).Nanoseconds()) / float64(ops)
}

func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }
func us(d time.Duration) float64 { return d.Seconds() * 1e6 }

// spinFor burns CPU for d (the spinning goroutines of T5).
func spinFor(d time.Duration) {
	end := time.Now().Add(d)
	x := uint64(1)
	for time.Now().Before(end) {
		for i := 0; i < 64; i++ {
			x = x*6364136223846793005 + 1
		}
	}
	sink = x
}

var sink uint64

// check records a failed correctness check: the message goes to stderr and a
// check_failed figure makes the parent report the run as failed.
func check(figs []figure, ok bool, what string) []figure {
	if !ok {
		fmt.Fprintf(os.Stderr, "check failed: %s\n", what)
		figs = append(figs, figure{"check_failed", 1})
	}
	return figs
}

// child runs one shape and prints "figure KEY VALUE" lines.
func child(p params, id string) {
	for _, s := range shapes {
		if s.id == id {
			figs := s.run(p)
			_, rss := rusage()
			figs = append(figs, figure{"rss_mib", float64(rss) / 1024})
			for _, f := range figs {
				fmt.Printf("figure %s %v\n", f.key, f.value)
			}
			return
		}
	}
	fmt.Fprintf(os.Stderr, "unknown shape %s\n", id)
	os.Exit(2)
}

// outcome is what one child produced.
type outcome struct {
	figs map[string]float64
	err  string
}

// spawnChild runs shape s in a child process, killing it after limit.
func spawnChild(s shape, quick bool, limit time.Duration) outcome {
	exe, err := os.Executable()
	if err != nil {
		return outcome{err: err.Error()}
	}
	args := []string{"-child", s.id}
	if quick {
		args = append(args, "-quick")
	}
	cmd := exec.Command(exe, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return outcome{err: err.Error()}
	}
	timer := time.AfterFunc(limit, func() { cmd.Process.Kill() })
	err = cmd.Wait()
	if !timer.Stop() {
		return outcome{err: fmt.Sprintf("killed after %v", limit)}
	}
	if err != nil {
		return outcome{err: "child failed: " + err.Error()}
	}
	figs := map[string]float64{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		w := strings.Fields(sc.Text())
		if len(w) == 3 && w[0] == "figure" {
			if v, err := strconv.ParseFloat(w[2], 64); err == nil {
				figs[w[1]] = v
			}
		}
	}
	if _, bad := figs["check_failed"]; bad {
		return outcome{figs: figs, err: "check failed"}
	}
	return outcome{figs: figs}
}

// medianOf combines repeated runs: each figure is the median over the runs; any failed
// run makes the whole outcome that failure.
func medianOf(runs []outcome) outcome {
	for _, o := range runs {
		if o.err != "" {
			return o
		}
	}
	figs := map[string]float64{}
	for k := range runs[0].figs {
		vals := make([]float64, 0, len(runs))
		for _, o := range runs {
			if v, ok := o.figs[k]; ok {
				vals = append(vals, v)
			}
		}
		sort.Float64s(vals)
		figs[k] = vals[len(vals)/2]
	}
	return outcome{figs: figs}
}

func selected(s shape, filters []string) bool {
	if len(filters) == 0 {
		return true
	}
	for _, f := range filters {
		for _, k := range []string{s.id, s.name, s.group} {
			if strings.Contains(strings.ToLower(k), f) {
				return true
			}
		}
	}
	return false
}

// jsonValue renders a figure or null with the error.
func jsonValue(o outcome, key string) string {
	v, ok := o.figs[key]
	switch {
	case ok && o.err != "":
		return strconv.FormatFloat(v, 'g', -1, 64) + ",\"error\":" + strconv.Quote(o.err)
	case o.err != "":
		return "null,\"error\":" + strconv.Quote(o.err)
	case !ok:
		return "null,\"error\":\"no figure " + key + "\""
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "null"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func main() {
	quick := flag.Bool("quick", false, "scale counts down about 10x (CI smoke run)")
	asJSON := flag.Bool("json", false, "print JSON lines instead of a table")
	filter := flag.String("shape", "", "comma-separated filters on shape id, name or group")
	childID := flag.String("child", "", "internal: run one shape in this process")
	version := flag.Bool("version", false, "print the Go version this binary was built with (runtime.Version) and exit")
	flag.Parse()
	if *version {
		// The Rust runner labels this binary's column with it (--go PATH, repeatable).
		fmt.Println(runtime.Version())
		return
	}
	p := params{quick: *quick, workers: runtime.GOMAXPROCS(0)}
	if *childID != "" {
		child(p, *childID)
		return
	}
	var filters []string
	for _, f := range append(strings.Split(*filter, ","), flag.Args()...) {
		if f = strings.TrimSpace(strings.ToLower(f)); f != "" {
			filters = append(filters, f)
		}
	}
	limit := 900 * time.Second
	if *quick {
		limit = 120 * time.Second
	}
	mode := "full"
	if *quick {
		mode = "quick"
	}
	if *asJSON {
		fmt.Printf("{\"meta\":true,\"source\":\"go\",\"go\":%q,\"gomaxprocs\":%d,\"quick\":%v}\n",
			runtime.Version(), p.workers, *quick)
	} else {
		fmt.Printf("%s, GOMAXPROCS = %d, %s run\n", runtime.Version(), p.workers, mode)
		fmt.Printf("%-24s %-18s %12s\n", "shape", "metric", "go")
	}
	failed := false
	for _, s := range shapes {
		if !selected(s, filters) {
			continue
		}
		start := time.Now()
		runs := make([]outcome, s.reps)
		for i := range runs {
			runs[i] = spawnChild(s, *quick, limit)
		}
		o := medianOf(runs)
		fmt.Fprintf(os.Stderr, "  %-8s go     %7.1f s\n", s.id, time.Since(start).Seconds())
		for i, k := range s.metrics {
			if *asJSON {
				fmt.Printf("{\"runtime\":\"go\",\"shape\":%q,\"name\":%q,\"metric\":%q,\"value\":%s}\n",
					s.id, s.name, k, jsonValue(o, k))
				continue
			}
			title := ""
			if i == 0 {
				title = s.id + " " + s.name
			}
			v := "ERR"
			if f, ok := o.figs[k]; ok {
				v = strconv.FormatFloat(f, 'f', 2, 64)
			}
			fmt.Printf("%-24s %-18s %12s\n", title, k, v)
		}
		if o.err != "" {
			fmt.Fprintf(os.Stderr, "error: %s: %s\n", s.id, o.err)
			failed = true
		}
	}
	// A crash, hang or failed check fails the run, as on the Rust side.
	if failed {
		os.Exit(1)
	}
}
