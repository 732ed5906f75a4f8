package main

// Network shapes N1, N2 and N4: echo round trips over loopback TCP. N4's deadline is Go's
// idiom, SetReadDeadline(time.Now().Add(30 * time.Second)) before every server read.

import (
	"io"
	"net"
	"sync"
	"time"
)

const netMsg = 64

// echoServer listens on a fresh loopback port; each connection echoes until its client
// closes.
func echoServer(deadline bool) (net.Listener, string) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
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
	c, err := net.Dial("tcp", addr)
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
	conns, rounds := 256, p.n(1000)
	l, addr := echoServer(deadline)
	defer l.Close()
	var wg sync.WaitGroup
	wg.Add(conns)
	m := startMeter()
	for i := 0; i < conns; i++ {
		go func() {
			defer wg.Done()
			echoClient(addr, rounds)
		}()
	}
	wg.Wait()
	return []figure{{"per_round_trip_ns", m.nsPer(conns * rounds)}, {"cpu_ms", ms(m.cpuSince())}}
}
