package main

import (
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// cpuMeter measures the CPU time the tool and, when it runs on this
// machine, the server spend over one phase. Beside the server on a small
// machine, the client's own cost is taken from the server's: the two side
// by side say whether the tool measured the server or itself.
type cpuMeter struct {
	serverPID      int
	client, server time.Duration
	serverReadable bool
	clientReadable bool
}

// startCPU starts measuring; serverPID 0 or below measures the tool alone.
func startCPU(serverPID int) *cpuMeter {
	m := &cpuMeter{serverPID: serverPID}
	m.client, m.clientReadable = selfCPU()
	if serverPID > 0 {
		m.server, m.serverReadable = processCPU(serverPID)
	}
	return m
}

// finish is the CPU spent since startCPU, per call of the phase's calls.
func (m *cpuMeter) finish(calls int64) *cpuReport {
	r := &cpuReport{}
	if now, ok := selfCPU(); ok && m.clientReadable {
		r.ClientSeconds, r.ClientUsPerCall = cpuFigures(now-m.client, calls)
	}
	if !m.serverReadable {
		return r
	}
	if now, ok := processCPU(m.serverPID); ok {
		r.ServerPID = m.serverPID
		r.ServerSeconds, r.ServerUsPerCall = cpuFigures(now-m.server, calls)
	}
	return r
}

func cpuFigures(d time.Duration, calls int64) (seconds, usPerCall float64) {
	if calls > 0 {
		usPerCall = round(float64(d.Microseconds()) / float64(calls))
	}
	return round(d.Seconds()), usPerCall
}

// selfCPU is the tool's user and system time so far, every thread's.
func selfCPU() (time.Duration, bool) {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0, false
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano()), true
}

// processCPU is another process's user and system time so far, from
// /proc/<pid>/stat (in clock ticks: 10 ms, which a phase of seconds and
// thousands of calls averages out).
func processCPU(pid int) (time.Duration, bool) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, false
	}
	st, err := p.Stat()
	if err != nil {
		return 0, false
	}
	return time.Duration(st.CPUTime() * float64(time.Second)), true
}
