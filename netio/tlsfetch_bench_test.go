package netio

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/valyala/bytebufferpool"
	"golang.org/x/sys/unix"

	"github.com/weir-mq/weir/netio/testcert"
	"github.com/weir-mq/weir/segment"
)

// BenchmarkFetchWrite measures the writer of Fetch responses, the part of a fetch that differs
// between plaintext (writev + sendfile) and TLS (read, encrypt, write) connections: one
// response of 1 MiB of records per op, as one partition's 1 MiB slice and as 16 partitions of
// 64 KiB with their encoded headers between them, written over loopback TCP to a goroutine that
// drains the socket without decrypting (so the client's decryption is not counted). Besides
// MB/s it reports the process's CPU time per MB (writer, drain and both ends of the loopback
// TCP stack; the drain's share is the same for every variant), the writer thread's own CPU time
// per MB, and allocations per response.
//
//	go test -run '^$' -bench BenchmarkFetchWrite -benchmem -count 3 ./netio/
func BenchmarkFetchWrite(b *testing.B) {
	dir := b.TempDir()
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i*7 + i>>13)
	}
	path := filepath.Join(dir, "00000000000000000000.log")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	ca := testcert.NewCA(b)
	serverCfg := &tls.Config{Certificates: []tls.Certificate{ca.Server(b).TLS}}
	clientCfg := &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1"}
	shapes := []struct {
		name  string
		parts int
	}{{"1x1MiB", 1}, {"16x64KiB", 16}}
	for _, shape := range shapes {
		body := NewBody(true)
		per := int64(len(data) / shape.parts)
		for i := 0; i < shape.parts; i++ {
			// a partition's encoded fields before its records (about what Fetch v12+ encodes)
			body.SetBytes(append(body.Bytes(), make([]byte, 60)...))
			body.AppendSlice(segment.Slice{File: f, Position: int64(i) * per, Length: per})
		}
		body.SetBytes(append(body.Bytes(), 0, 0, 0, 0))
		for _, mode := range []string{"plain", "tls"} {
			b.Run(mode+"/"+shape.name, func(b *testing.B) {
				benchFetchWrite(b, body, mode == "tls", serverCfg, clientCfg)
			})
		}
	}
}

func benchFetchWrite(b *testing.B, body *Body, useTLS bool, serverCfg, clientCfg *tls.Config) {
	server, client := tcpPair(b)
	var w net.Conn = server
	tcp := server
	if useTLS {
		st := serverTLS(server, serverCfg)
		ct := tls.Client(client, clientCfg)
		errc := make(chan error, 1)
		go func() { errc <- ct.Handshake() }()
		if err := st.Handshake(); err != nil {
			b.Fatal(err)
		}
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
		w, tcp = st, nil
	}
	// The drain reads the raw TCP stream (ciphertext on TLS) until the writer closes.
	drained := make(chan int64, 1)
	go func() {
		buf := make([]byte, 256<<10)
		var n int64
		for {
			m, err := client.Read(buf)
			n += int64(m)
			if err != nil {
				drained <- n
				return
			}
		}
	}()
	scratch := bytebufferpool.Get()
	defer bytebufferpool.Put(scratch)
	r := Reply{Body: body}
	b.SetBytes(body.Len())
	b.ReportAllocs()
	cpu0 := benchProcessCPU()
	b.ResetTimer()
	// The writer runs alone on its own thread, so that thread's CPU time is the writer's cost:
	// user space, the send syscalls and, on loopback, the kernel's delivery to the receiving
	// socket, which runs in the sender's context. It does not depend on what else the machine
	// runs, unlike MB/s.
	var writerCPU time.Duration
	werr := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		t0 := threadCPU()
		for i := 0; i < b.N; i++ {
			if err := writeReply(w, tcp, int32(i), 1, &r, scratch); err != nil {
				werr <- err
				return
			}
		}
		writerCPU = threadCPU() - t0
		werr <- nil
	}()
	if err := <-werr; err != nil {
		b.Fatal(err)
	}
	server.CloseWrite()
	n := <-drained
	b.StopTimer()
	cpu := benchProcessCPU() - cpu0
	mb := float64(b.N) * float64(body.Len()) / 1e6
	b.ReportMetric(float64(writerCPU.Microseconds())/mb, "writer-cpu-µs/MB")
	b.ReportMetric(float64(cpu.Microseconds())/mb, "cpu-µs/MB")
	if want := int64(b.N) * body.Len(); n < want {
		b.Fatalf("drained %d bytes, want at least %d", n, want)
	}
	client.Close()
	server.Close()
}

// tcpPair is a connected loopback TCP pair.
func tcpPair(tb testing.TB) (server, client *net.TCPConn) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		tb.Fatal(errors.New("accept failed"))
	}
	tb.Cleanup(func() { c.Close(); s.Close() })
	return s.(*net.TCPConn), c.(*net.TCPConn)
}

// threadCPU is the calling thread's CPU time so far.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(fmt.Sprint("clock_gettime: ", err))
	}
	return time.Duration(ts.Nano())
}

// benchProcessCPU is the process's user+system CPU time so far.
func benchProcessCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		panic(fmt.Sprint("getrusage: ", err))
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
