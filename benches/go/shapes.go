package main

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// runW runs body(t) in W goroutines and waits for all.
func runW(p params, body func(t int)) {
	var wg sync.WaitGroup
	wg.Add(p.workers)
	for t := 0; t < p.workers; t++ {
		go func(t int) {
			defer wg.Done()
			body(t)
		}(t)
	}
	wg.Wait()
}

// T1: W goroutines each start and at once stop N/W one-hour AfterFunc timers.
func t1StartStop(p params) []figure {
	per, total := p.split(p.n(1_000_000))
	m := startMeter()
	runW(p, func(int) {
		for i := 0; i < per; i++ {
			if !time.AfterFunc(time.Hour, func() {}).Stop() {
				panic("stop of a fresh timer failed")
			}
		}
	})
	return []figure{{"per_op_ns", m.nsPer(total)}}
}

// T2: W goroutines each Reset their own armed timer N/W times to one hour ahead (an
// AfterFunc timer, like the gort side, so that it is heaped in every Go version).
func t2Reset(p params) []figure {
	per, total := p.split(p.n(1_000_000))
	m := startMeter()
	runW(p, func(int) {
		t := time.AfterFunc(time.Hour, func() {})
		for i := 0; i < per; i++ {
			t.Reset(time.Hour)
		}
		t.Stop()
	})
	return []figure{{"per_op_ns", m.nsPer(total)}}
}

// T2_chan: T2 on a channel timer (time.NewTimer), whose Reset the gort side's Timer::reset
// matches; with nobody receiving, as in a select loop between receives. The Go side of
// T2_sleep too (Go has no sleep future to reset: a Timer.Reset is what a Go program resets).
func t2ResetChan(p params) []figure {
	per, total := p.split(p.n(1_000_000))
	m := startMeter()
	runW(p, func(int) {
		t := time.NewTimer(time.Hour)
		for i := 0; i < per; i++ {
			t.Reset(time.Hour)
		}
		t.Stop()
	})
	return []figure{{"per_op_ns", m.nsPer(total)}}
}

// T3: K goroutines each sleep a random 1..1000 ms and record their lateness.
func t3SleepFanout(p params, k int) []figure {
	ds := durations(seed^3, k, time.Millisecond, 1000*time.Millisecond)
	lates := make([]int64, k)
	var wg sync.WaitGroup
	wg.Add(k)
	m := startMeter()
	for i, d := range ds {
		go func(i int, d time.Duration) {
			due := time.Now().Add(d)
			time.Sleep(time.Until(due))
			lates[i] = late(due, time.Now())
			wg.Done()
		}(i, d)
	}
	wg.Wait()
	wall, cpu := time.Since(m.wall), m.cpuSince()
	pc := percentilesUs(lates)
	return []figure{{"wall_ms", ms(wall)}, {"cpu_ms", ms(cpu)},
		{"late_p50_us", pc[0]}, {"late_p99_us", pc[1]}, {"late_max_us", pc[2]}}
}

// T4: N AfterFunc callbacks due uniformly over the next second, scheduled by W goroutines.
// Lateness is measured from max(deadline, start of the timer).
func t4AfterFuncStorm(p params) []figure {
	per, n := p.split(p.n(1_000_000))
	offs := durations(seed^4, n, 0, 999_999_999)
	lates := make([]int64, n)
	var wg sync.WaitGroup
	wg.Add(n)
	m := startMeter()
	base := time.Now()
	for t := 0; t < p.workers; t++ {
		go func(t int) {
			for i := t * per; i < (t+1)*per; i++ {
				now := time.Now()
				due := base.Add(offs[i])
				if due.Before(now) {
					due = now
				}
				i := i
				time.AfterFunc(due.Sub(now), func() {
					lates[i] = late(due, time.Now())
					wg.Done()
				})
			}
		}(t)
	}
	wg.Wait()
	wall, cpu := time.Since(m.wall), m.cpuSince()
	return []figure{{"last_fired_ms", ms(wall)}, {"cpu_ms", ms(cpu)},
		{"late_p99_us", percentilesUs(lates)[1]}}
}

// T5: one 1 ms Ticker read by one goroutine; with busy, W other goroutines spin on CPU work
// in 50 µs slices between yields. Lateness is measured from the ideal schedule to the
// receipts, so Go 1.19's value (the send instant, not the due instant) only counts drops.
func t5TickerJitter(p params, busy bool) []figure {
	n := p.pick(2000, 200)
	var stop int32
	if busy {
		for i := 0; i < p.workers; i++ {
			go func() {
				for atomic.LoadInt32(&stop) == 0 {
					spinFor(50 * time.Microsecond)
					runtime.Gosched()
				}
			}()
		}
	}
	period := time.Millisecond
	m := startMeter()
	t0 := time.Now()
	tk := time.NewTicker(period)
	recs := make([]tickRec, 0, n)
	for i := 0; i < n; i++ {
		v := <-tk.C
		recs = append(recs, tickRec{v, time.Now()})
	}
	tk.Stop()
	atomic.StoreInt32(&stop, 1)
	grid := func(due time.Time) int64 {
		d := due.Sub(t0)
		if d < 0 {
			d = 0
		}
		return int64(d / period)
	}
	pc := tickLateness(t0, period, recs)
	dropped := grid(recs[len(recs)-1].due) - grid(recs[0].due) + 1 - int64(len(recs))
	if dropped < 0 {
		dropped = 0
	}
	return []figure{{"late_p50_us", pc[0]}, {"late_p99_us", pc[1]}, {"late_max_us", pc[2]},
		{"dropped", float64(dropped)}, {"cpu_ms", ms(m.cpuSince())}}
}

// tickRec is one receipt of a ticker: the value delivered and when it arrived.
type tickRec struct{ due, got time.Time }

// tickLateness: lateness from the schedule, for each grid point up to the last receipt, the
// time to the first receipt at or after it (common.rs tick_figures explains why); p50, p99, max.
func tickLateness(t0 time.Time, period time.Duration, recs []tickRec) [3]float64 {
	lates := make([]int64, 0, len(recs))
	last := recs[len(recs)-1].got
	next := 0
	for k := 1; ; k++ {
		ideal := t0.Add(time.Duration(k) * period)
		if ideal.After(last) {
			break
		}
		for recs[next].got.Before(ideal) {
			next++
		}
		lates = append(lates, late(ideal, recs[next].got))
	}
	return percentilesUs(lates)
}

// T10: one 1 ms Ticker read by one goroutine for a window (2 s, 0.4 s quick) while W other
// goroutines spin on CPU work in slices of `slice` between yields.
func t10TickerCoarse(p params, slice time.Duration) []figure {
	window := time.Duration(p.pick(2000, 400)) * time.Millisecond
	var stop int32
	for i := 0; i < p.workers; i++ {
		go func() {
			for atomic.LoadInt32(&stop) == 0 {
				spinFor(slice)
				runtime.Gosched()
			}
		}()
	}
	period := time.Millisecond
	t0 := time.Now()
	tk := time.NewTicker(period)
	recs := make([]tickRec, 0, int(window/period))
	for time.Since(t0) < window {
		v := <-tk.C
		recs = append(recs, tickRec{v, time.Now()})
	}
	tk.Stop()
	atomic.StoreInt32(&stop, 1)
	pc := tickLateness(t0, period, recs)
	return []figure{{"late_p50_us", pc[0]}, {"late_p99_us", pc[1]}, {"late_max_us", pc[2]},
		{"received", float64(len(recs))}}
}

// T6: N calls wrapped in a 1 s timeout, each completing after one yield, over W
// goroutines; the Go idiom is a context with a deadline, cancelled when the call returns.
func t6TimeoutRPC(p params) []figure {
	per, total := p.split(p.n(1_000_000))
	m := startMeter()
	runW(p, func(int) {
		for i := 0; i < per; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			runtime.Gosched()
			if ctx.Err() != nil {
				panic("a one-yield call timed out")
			}
			cancel()
		}
	})
	return []figure{{"per_op_ns", m.nsPer(total)}}
}

// T7: N AfterFunc timers, each due a random [1 s, 10 s] after it starts (quick:
// [0.1 s, 1 s]), started by W goroutines in chunks of 1,000; a goroutine per chunk (the
// starter yields after each) stops 90 % of that chunk (every index not divisible by 10);
// the rest fire.
func t7MassCancel(p params) []figure {
	const chunk = 1000
	per, n := p.split(p.n(1_000_000))
	lo := time.Duration(p.pick(1000, 100)) * time.Millisecond
	hi := time.Duration(p.pick(10_000, 1000)) * time.Millisecond
	ds := durations(seed^7, n, lo, hi)
	kept := int64((n + 9) / 10)
	var fired int64
	done := make(chan struct{})
	m := startMeter()
	runW(p, func(t int) {
		end := (t + 1) * per
		for first := t * per; first < end; first += chunk {
			last := first + chunk
			if last > end {
				last = end
			}
			timers := make([]*time.Timer, 0, last-first)
			for i := first; i < last; i++ {
				timers = append(timers, time.AfterFunc(ds[i], func() {
					if atomic.AddInt64(&fired, 1) == kept {
						close(done)
					}
				}))
			}
			go func(first int, timers []*time.Timer) {
				for j, tm := range timers {
					if (first+j)%10 != 0 {
						tm.Stop()
					}
				}
			}(first, timers)
			// Let the stopper run now, not after every chunk was started.
			runtime.Gosched()
		}
	})
	started := time.Now()
	<-done
	// Anything stopped too late would fire by the last deadline.
	time.Sleep(time.Until(started.Add(hi + 20*time.Millisecond)))
	f := atomic.LoadInt64(&fired)
	figs := []figure{{"cpu_ms", ms(m.cpuSince())}, {"fired", float64(f)}}
	return check(figs, f == kept, fmt.Sprintf("fired %d, expected %d", f, kept))
}

// T8: W x 1000 AfterFunc timers due at the same instant 50 ms ahead, started from W
// goroutines; the figure is how long after that instant the last one fired (median and
// max of rounds).
func t8Simultaneous(p params) []figure {
	rounds := p.pick(10, 3)
	lasts := make([]int64, 0, rounds)
	for r := 0; r < rounds; r++ {
		origin := time.Now()
		due := origin.Add(50 * time.Millisecond)
		var lastNs int64
		var wg sync.WaitGroup
		wg.Add(p.workers * 1000)
		for t := 0; t < p.workers; t++ {
			go func() {
				for i := 0; i < 1000; i++ {
					time.AfterFunc(time.Until(due), func() {
						at := int64(time.Since(origin))
						for {
							old := atomic.LoadInt64(&lastNs)
							if at <= old || atomic.CompareAndSwapInt64(&lastNs, old, at) {
								break
							}
						}
						wg.Done()
					})
				}
			}()
		}
		wg.Wait()
		lasts = append(lasts, late(due, origin.Add(time.Duration(atomic.LoadInt64(&lastNs)))))
	}
	pc := percentilesUs(lasts)
	return []figure{{"last_p50_us", pc[0]}, {"last_max_us", pc[2]}}
}

// T9: W goroutines each own 10,000 one-hour AfterFunc timers; N/W times each resets a
// random one to 50 µs, waits for its callback, and resets it back to one hour.
func t9ResetEarlier(p params) []figure {
	per, total := p.split(p.n(100_000))
	var ready, finished sync.WaitGroup
	ready.Add(p.workers)
	finished.Add(p.workers)
	start := make(chan struct{})
	for t := 0; t < p.workers; t++ {
		go func(t int) {
			defer finished.Done()
			fired := make(chan struct{}, 1)
			timers := make([]*time.Timer, 10_000)
			for i := range timers {
				timers[i] = time.AfterFunc(time.Hour, func() {
					select {
					case fired <- struct{}{}:
					default:
					}
				})
			}
			ready.Done()
			<-start
			r := rng{seed ^ 9 ^ uint64(t)}
			for i := 0; i < per; i++ {
				tm := timers[r.below(10_000)]
				tm.Reset(50 * time.Microsecond)
				<-fired
				tm.Reset(time.Hour)
			}
			for _, tm := range timers {
				tm.Stop()
			}
		}(t)
	}
	ready.Wait()
	m := startMeter()
	close(start)
	finished.Wait()
	return []figure{{"per_op_ns", m.nsPer(total)}, {"cpu_ms", ms(m.cpuSince())}}
}

// T9_chan: T9 with channel timers (time.NewTimer): each goroutine resets a random one of its
// 10,000 to 50 µs, receives from its channel, and resets it back to one hour.
func t9ResetEarlierChan(p params) []figure {
	per, total := p.split(p.n(100_000))
	var ready, finished sync.WaitGroup
	ready.Add(p.workers)
	finished.Add(p.workers)
	start := make(chan struct{})
	for t := 0; t < p.workers; t++ {
		go func(t int) {
			defer finished.Done()
			timers := make([]*time.Timer, 10_000)
			for i := range timers {
				timers[i] = time.NewTimer(time.Hour)
			}
			ready.Done()
			<-start
			r := rng{seed ^ 9 ^ uint64(t)}
			for i := 0; i < per; i++ {
				tm := timers[r.below(10_000)]
				tm.Reset(50 * time.Microsecond)
				<-tm.C
				tm.Reset(time.Hour)
			}
			for _, tm := range timers {
				tm.Stop()
			}
		}(t)
	}
	ready.Wait()
	m := startMeter()
	close(start)
	finished.Wait()
	return []figure{{"per_op_ns", m.nsPer(total)}, {"cpu_ms", ms(m.cpuSince())}}
}

// R1: one goroutine starts N empty goroutines and waits for all.
func r1SpawnMany(p params) []figure {
	n := p.n(1_000_000)
	var wg sync.WaitGroup
	wg.Add(n)
	m := startMeter()
	for i := 0; i < n; i++ {
		go wg.Done()
	}
	wg.Wait()
	return []figure{{"per_task_ns", m.nsPer(n)}}
}

// R2: 1,000 goroutines each yield 1,000 times (quick: 100 times).
func r2YieldMany(p params) []figure {
	tasks, yields := 1000, p.n(1000)
	var wg sync.WaitGroup
	wg.Add(tasks)
	m := startMeter()
	for i := 0; i < tasks; i++ {
		go func() {
			for j := 0; j < yields; j++ {
				runtime.Gosched()
			}
			wg.Done()
		}()
	}
	wg.Wait()
	return []figure{{"per_yield_ns", m.nsPer(tasks * yields)}}
}

// R3: 1,000 pairs of goroutines bounce a message 1,000 times (quick: 100) over two
// channels of capacity 1.
func r3PingPong(p params) []figure {
	pairs, rounds := 1000, p.n(1000)
	var wg sync.WaitGroup
	wg.Add(pairs)
	m := startMeter()
	for i := 0; i < pairs; i++ {
		ping, pong := make(chan int, 1), make(chan int, 1)
		go func() {
			for v := range ping {
				pong <- v
			}
		}()
		go func() {
			for j := 0; j < rounds; j++ {
				ping <- j
				if <-pong != j {
					panic("ping_pong: wrong value")
				}
			}
			close(ping)
			wg.Done()
		}()
	}
	wg.Wait()
	return []figure{{"per_round_trip_ns", m.nsPer(pairs * rounds)}}
}

// chain starts the next link of R4's chain, or closes done at the end.
func chain(left int, done chan struct{}) {
	if left == 0 {
		close(done)
		return
	}
	go chain(left-1, done)
}

// R4: each goroutine starts the next, 100,000 deep (quick: 10,000).
func r4ChainedSpawn(p params) []figure {
	n := p.n(100_000)
	done := make(chan struct{})
	m := startMeter()
	chain(n, done)
	<-done
	return []figure{{"per_spawn_ns", m.nsPer(n)}}
}
