package main

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/procfs"
)

// tcpListen is the kernel's state number of a listening TCP socket.
const tcpListen = 10

// localServerPID finds the process on this machine listening on addr's
// port, or returns 0 when addr is not local or no such process is visible
// (another user's processes hide their sockets).
func localServerPID(addr string) (int, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("port of %s: %w", addr, err)
	}
	if !isLocal(host) {
		return 0, nil
	}
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return 0, err
	}
	inodes := map[string]bool{}
	for _, table := range []func() (procfs.NetTCP, error){fs.NetTCP, fs.NetTCP6} {
		lines, err := table()
		if err != nil {
			continue // no IPv6, or no /proc/net at all
		}
		for _, l := range lines {
			if l.St == tcpListen && l.LocalPort == port {
				inodes[fmt.Sprintf("socket:[%d]", l.Inode)] = true
			}
		}
	}
	if len(inodes) == 0 {
		return 0, nil
	}
	procs, err := fs.AllProcs()
	if err != nil {
		return 0, err
	}
	for _, p := range procs {
		targets, err := p.FileDescriptorTargets()
		if err != nil {
			continue
		}
		if slices.ContainsFunc(targets, func(t string) bool { return inodes[t] }) {
			return p.PID, nil
		}
	}
	return 0, nil
}

// isLocal reports whether host names this machine.
func isLocal(host string) bool {
	if host == "" || host == "localhost" {
		return true
	}
	ips, err := net.LookupIP(host)
	if err != nil {
		return false
	}
	addrs, _ := net.InterfaceAddrs()
	for _, ip := range ips {
		if ip.IsLoopback() {
			return true
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return true
			}
		}
	}
	return false
}

// rssSampler reads a process's resident set size from /proc/<pid>/status
// at an interval until stopped.
type rssSampler struct {
	pid     int
	started time.Time
	mu      sync.Mutex
	samples []rssSample
	stop    context.CancelFunc
	done    chan struct{}
}

func sampleRSS(pid int, every time.Duration) *rssSampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &rssSampler{pid: pid, started: time.Now(), stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			s.sample()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *rssSampler) sample() {
	p, err := procfs.NewProc(s.pid)
	if err != nil {
		return
	}
	st, err := p.NewStatus()
	if err != nil {
		return
	}
	s.mu.Lock()
	s.samples = append(s.samples, rssSample{Seconds: round(time.Since(s.started).Seconds()), Bytes: st.VmRSS})
	s.mu.Unlock()
}

// finish takes a last sample and returns them all.
func (s *rssSampler) finish() *rssReport {
	s.stop()
	<-s.done
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &rssReport{PID: s.pid, Samples: s.samples}
	for _, x := range s.samples {
		r.MaxBytes = max(r.MaxBytes, x.Bytes)
	}
	if len(s.samples) > 0 {
		r.FirstBytes, r.LastBytes = s.samples[0].Bytes, s.samples[len(s.samples)-1].Bytes
	}
	return r
}
