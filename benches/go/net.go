package main

// Network shapes N1, N2, N4 (echo round trips over loopback TCP; N4's deadline is Go's idiom,
// SetReadDeadline(time.Now().Add(30 * time.Second)) before every server read), N5 (idle
// connections whose reads time out) and N6 (N2 over Unix sockets).

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const netMsg = 64

// echoServer listens on a fresh loopback port; each connection echoes until its client
// closes.
func echoServer(deadline bool) (net.Listener, string) {
	return echoServerOn("tcp", "127.0.0.1:0", deadline)
}

// echoServerOn is echoServer on a listener of network ("tcp", "unix") at address.
func echoServerOn(network, address string, deadline bool) (net.Listener, string) {
	l, err := net.Listen(network, address)
	if err != nil {
		panic(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				buf := make([]byte, netMsg)
				for {
					if deadline {
						c.SetReadDeadline(time.Now().Add(30 * time.Second))
					}
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					if _, err := c.Write(buf[:n]); err != nil {
						return
					}
				}
			}(c)
		}
	}()
	return l, l.Addr().String()
}

func echoClient(addr string, rounds int) {
	echoClientOn("tcp", addr, rounds)
}

// echoClientOn is echoClient over network ("tcp", "unix").
func echoClientOn(network, addr string, rounds int) {
	c, err := net.Dial(network, addr)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	msg := make([]byte, netMsg)
	buf := make([]byte, netMsg)
	for i := 0; i < rounds; i++ {
		if _, err := c.Write(msg); err != nil {
			panic(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			panic(err)
		}
	}
}

// N1: one connection, N = 100,000 round trips.
func n1EchoPingPong(p params) []figure {
	n := p.n(100_000)
	l, addr := echoServer(false)
	defer l.Close()
	m := startMeter()
	echoClient(addr, n)
	return []figure{{"per_round_trip_ns", m.nsPer(n)}}
}

// N2 / N4: C = 256 clients at once, 1,000 round trips each.
func echoFanin(p params, deadline bool) []figure {
	l, addr := echoServer(deadline)
	defer l.Close()
	return faninClients(p, "tcp", addr)
}

// faninClients runs C = 256 clients at once over network to addr, 1,000 round trips each.
func faninClients(p params, network, addr string) []figure {
	conns, rounds := 256, p.n(1000)
	var wg sync.WaitGroup
	wg.Add(conns)
	m := startMeter()
	for i := 0; i < conns; i++ {
		go func() {
			defer wg.Done()
			echoClientOn(network, addr, rounds)
		}()
	}
	wg.Wait()
	return []figure{{"per_round_trip_ns", m.nsPer(conns * rounds)}, {"cpu_ms", ms(m.cpuSince())}}
}

// N6: N2 over Unix stream sockets (a listener on a fresh path in the temporary directory;
// Go removes it when the listener closes).
func n6UnixFanin(p params) []figure {
	path := filepath.Join(os.TempDir(), fmt.Sprintf("gort-shapes-go-%d.sock", os.Getpid()))
	os.Remove(path)
	l, addr := echoServerOn("unix", path, false)
	defer l.Close()
	return faninClients(p, "unix", addr)
}

// N5: C = 9,000 idle connections (quick: 900); each server-side read has a deadline uniform
// in [100 ms, 1100 ms] (SetReadDeadline) and must end with a timeout.
func n5IdleDeadlines(p params) []figure {
	raiseFdLimit()
	conns := p.n(9000)
	ds := durations(5, conns, 100*time.Millisecond, 1100*time.Millisecond)
	l, addr := echoListener()
	defer l.Close()
	clients := make([]net.Conn, 0, conns)
	servers := make([]net.Conn, 0, conns)
	for i := 0; i < conns; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			panic(err)
		}
		s, err := l.Accept()
		if err != nil {
			panic(err)
		}
		clients = append(clients, c)
		servers = append(servers, s)
	}
	late := make([]int64, conns)
	var timedOut int64
	var wg sync.WaitGroup
	wg.Add(conns)
	m := startMeter()
	for i, s := range servers {
		go func(i int, s net.Conn) {
			defer wg.Done()
			deadline := time.Now().Add(ds[i])
			s.SetReadDeadline(deadline)
			_, err := s.Read(make([]byte, 1))
			now := time.Now()
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				atomic.AddInt64(&timedOut, 1)
			}
			if d := now.Sub(deadline); d > 0 {
				late[i] = d.Nanoseconds()
			}
		}(i, s)
	}
	wg.Wait()
	cpu := m.cpuSince()
	for i := range clients {
		clients[i].Close()
		servers[i].Close()
	}
	pc := percentilesUs(late)
	return []figure{{"late_p50_us", pc[0]}, {"late_p99_us", pc[1]}, {"late_max_us", pc[2]},
		{"cpu_ms", ms(cpu)}, {"timed_out", float64(timedOut)}}
}

func echoListener() (net.Listener, string) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	return l, l.Addr().String()
}

func raiseFdLimit() {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) == nil && r.Cur < r.Max {
		r.Cur = r.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r)
	}
}

// openFds counts this process's open file descriptors.
func openFds() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}

// N3: 20,000 times (quick: 2,000): connect, the server accepts, one 1-byte echo, both sides
// close; 16 clients at once.
func n3AcceptChurn(p params) []figure {
	clients, total := 16, p.n(20_000)
	l, addr := echoServer(false)
	defer l.Close()
	fds0 := openFds()
	var wg sync.WaitGroup
	wg.Add(clients)
	m := startMeter()
	for k := 0; k < clients; k++ {
		n := total / clients
		if k < total%clients {
			n++
		}
		go func(n int) {
			defer wg.Done()
			b := make([]byte, 1)
			for i := 0; i < n; i++ {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					panic(err)
				}
				if _, err := c.Write(b); err != nil {
					panic(err)
				}
				if _, err := io.ReadFull(c, b); err != nil {
					panic(err)
				}
				c.Close()
			}
		}(n)
	}
	wg.Wait()
	per := m.nsPer(total)
	fds := openFds()
	for i := 0; i < 100 && fds > fds0; i++ {
		time.Sleep(10 * time.Millisecond)
		fds = openFds()
	}
	left := fds - fds0
	if left < 0 {
		left = 0
	}
	return []figure{{"per_conn_ns", per}, {"fds_left", float64(left)}}
}
