package main

import (
	"os"
	"testing"
	"time"
)

func TestCPUMeterCountsThisProcess(t *testing.T) {
	m := startCPU(os.Getpid())
	// Spin for 200 ms of CPU, twenty clock ticks of /proc's accounting (by
	// CPU time, not wall time: others may share the machine).
	began, _ := selfCPU()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if now, _ := selfCPU(); now-began >= 200*time.Millisecond {
			break
		}
	}
	r := m.finish(1000)
	for name, got := range map[string][2]float64{"client": {r.ClientSeconds, r.ClientUsPerCall}, "server": {r.ServerSeconds, r.ServerUsPerCall}} {
		secs, perCall := got[0], got[1]
		// The spin, give or take a tick, and the per-call figure is the
		// same time over 1000 calls.
		if secs < 0.18 || secs > 2 || perCall < secs*1e3-20 || perCall > secs*1e3+20 {
			t.Errorf("%s: %v s, %v us a call over 1000 calls", name, secs, perCall)
		}
	}
	if r.ServerPID != os.Getpid() {
		t.Errorf("server pid %d, want %d", r.ServerPID, os.Getpid())
	}
	if alone := startCPU(0).finish(10); alone.ServerPID != 0 || alone.ServerSeconds != 0 {
		t.Errorf("a meter without a server reported one: %+v", alone)
	}
}
