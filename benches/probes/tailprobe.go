// The Go side of tailprobe.rs: net/http server and 1,000 keep-alive clients (one Transport,
// one connection each), 40 requests each, GOMAXPROCS 2. Run: go run benches/probes/tailprobe.go [CLIENTS]

package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"time"
)

func main() {
	runtime.GOMAXPROCS(2)
	clients := 1000
	if len(os.Args) > 1 {
		clients, _ = strconv.Atoi(os.Args[1])
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	go http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello\n")) }))
	addr := "http://" + l.Addr().String() + "/"
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}
			cl := &http.Client{Transport: tr}
			var mine []time.Duration
			for i := 0; i < 40; i++ {
				t := time.Now()
				resp, err := cl.Get(addr)
				if err != nil {
					panic(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if i > 0 {
					mine = append(mine, time.Since(t))
				}
			}
			tr.CloseIdleConnections()
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	at := func(q float64) int64 { return lat[int(float64(len(lat)-1)*q)].Microseconds() }
	fmt.Printf("go    clients=%d: %.0f req/s; latency µs p50 %d p90 %d p99 %d p99.9 %d max %d\n", clients, float64(len(lat))/wall.Seconds(), at(0.5), at(0.9), at(0.99), at(0.999), at(1.0))
}
