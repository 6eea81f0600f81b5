package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/internal/grpcclient"
)

// runTool runs the tool in process with args and returns its exit code,
// its parsed report (zero when it printed none) and its stderr.
func runTool(t *testing.T, args ...string) (int, report, map[string]any, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), append(args, "-progress", "off"), &stdout, &stderr)
	var rep report
	var shape map[string]any
	if stdout.Len() > 0 {
		if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
			t.Fatalf("report is not JSON: %v\n%s", err, stdout.String())
		}
		_ = json.Unmarshal(stdout.Bytes(), &shape)
	}
	return code, rep, shape, stderr.String()
}

// field follows a dotted path of JSON object keys.
func field(t *testing.T, shape map[string]any, path string) any {
	t.Helper()
	var v any = shape
	for _, key := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("report has no %s: %s is not an object", path, key)
		}
		if v, ok = m[key]; !ok {
			t.Fatalf("report has no %s (missing %q)", path, key)
		}
	}
	return v
}

// requireLatencies fails unless every RPC of p has calls, no errors and
// ordered percentiles.
func requireLatencies(t *testing.T, what string, p *phaseReport, rpcs ...string) {
	t.Helper()
	if p == nil {
		t.Fatalf("%s: no report", what)
	}
	for _, name := range rpcs {
		r, ok := p.RPCs[name]
		if !ok || r.Calls == 0 {
			t.Fatalf("%s: no %s calls in %+v", what, name, p.RPCs)
		}
		l := r.LatencyMs
		if r.Errors != 0 || !(0 < l.P50 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.Max) || r.PerSecond <= 0 {
			t.Fatalf("%s %s: %+v", what, name, r)
		}
	}
}

const fleetArgs = "-cameras 30 -concurrency 4 -batch-size 10"

func TestRunMixesEveryRPCAndComparesWithHealthChecks(t *testing.T) {
	s := startServer(t)
	code, rep, shape, stderr := runTool(t, append([]string{"bench", "-addr", s.addr, "-ops", "400", "-ceiling"}, strings.Fields(fleetArgs)...)...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if rep.Mode != "run" || rep.Errors != 0 || rep.Workload.Calls != 400 || rep.Ceiling.Calls != 400 {
		t.Fatalf("report: mode %s, errors %d, workload %d calls, ceiling %d calls", rep.Mode, rep.Errors, rep.Workload.Calls, rep.Ceiling.Calls)
	}
	requireLatencies(t, "workload", rep.Workload, "create", "get_latest", "batch_get_latest", "list")
	requireLatencies(t, "ceiling", rep.Ceiling, "health_check")
	for _, key := range []string{"throughput_vs_health", "create_p99_vs_health", "get_latest_p99_vs_health", "list_p50_vs_health"} {
		if rep.Ratios[key] <= 0 {
			t.Errorf("ratio %s = %v", key, rep.Ratios[key])
		}
	}
	// The server runs in this process: the tool finds it by its port, and
	// its CPU time is the tool's own.
	for name, p := range map[string]*phaseReport{"workload": rep.Workload, "ceiling": rep.Ceiling} {
		if c := p.CPU; c == nil || c.ClientUsPerCall <= 0 || c.ServerPID != os.Getpid() || c.ServerUsPerCall <= 0 {
			t.Errorf("%s CPU: %+v", name, p.CPU)
		}
	}
	for _, path := range []string{"workload.rpcs.get_latest.latency_ms.p99", "workload.per_second", "ceiling.rpcs.health_check.latency_ms.max", "seed.calls",
		"workload.cpu.client_us_per_call", "workload.cpu.server_us_per_call"} {
		if _, ok := field(t, shape, path).(float64); !ok {
			t.Errorf("%s is not a number", path)
		}
	}
	// The fleet's first minute was seeded, then creates went on a minute at a time.
	got := s.latest(t, "load-cam-000029")
	if !got["single"].After(rep.StartedAt.Add(-time.Minute)) || got["pano"].IsZero() || got["pre-stitch"].IsZero() {
		t.Fatalf("newest images of the last camera: %v", got)
	}
}

func TestSeedWritesEveryCamerasHistory(t *testing.T) {
	s := startServer(t)
	code, rep, _, stderr := runTool(t, "seed", "-addr", s.addr, "-cameras", "5", "-days", "2", "-seed-interval", "2h")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// 2 days every 2 hours, then the minute of the run: 25 images per camera and type.
	const perCamera = 25
	if rep.Seed.Calls != 5*3*perCamera || rep.Errors != 0 || rep.Workload != nil {
		t.Fatalf("seed report: %+v, workload %v", rep.Seed, rep.Workload)
	}
	requireLatencies(t, "seed", rep.Seed, "create")
	for cam := range 5 {
		id := fmt.Sprintf("load-cam-%06d", cam)
		latest := s.latest(t, id)
		if d := latest["single"].Sub(rep.StartedAt); d < -time.Minute || d > time.Minute || !latest["pano"].Equal(latest["single"]) || !latest["pre-stitch"].Equal(latest["single"]) {
			t.Fatalf("newest images of %s: %v, want the run's minute %v", id, latest, rep.StartedAt)
		}
		all := s.singles(t, id)
		if len(all) != perCamera {
			t.Fatalf("%s has %d single images, want %d", id, len(all), perCamera)
		}
		if oldest := all[len(all)-1].GetCapturedAt().AsTime(); latest["single"].Sub(oldest) != 48*time.Hour {
			t.Fatalf("%s history spans %v, want 48h", id, latest["single"].Sub(oldest))
		}
	}
}

func TestPurgeDuringSplitsLatenciesAroundAnExactPurge(t *testing.T) {
	s := startServer(t)
	code, rep, shape, stderr := runTool(t, "purge-during", "-addr", s.addr, "-cameras", "5", "-batch-size", "5",
		"-days", "2", "-seed-interval", "30m", "-purge-older-than", "24h15m", "-ops", "600", "-concurrency", "4")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	p := rep.Purge
	// The purge takes what is older than one day and a quarter hour: 48 half-hours per camera
	// and type. The quarter hour keeps every seeded image a whole quarter hour away from the
	// cutoff, so the count does not depend on the minute in which the purge starts (a purge
	// spares the cutoff's own minute).
	const expired = 5 * 3 * 48
	if p == nil || p.State != "PURGE_STATE_SUCCEEDED" || p.MetadataRowsDeleted != expired || p.IndexRowsDeleted != expired || p.DevicesTotal != 15 {
		t.Fatalf("purge: %+v", p)
	}
	calls := p.Before.Calls + p.During.Calls
	if p.After != nil {
		calls += p.After.Calls
	}
	if calls != 600 || p.Before.Calls < 300 || rep.Errors != 0 {
		t.Fatalf("calls before %d, during %d, after %v; errors %d", p.Before.Calls, p.During.Calls, p.After, rep.Errors)
	}
	requireLatencies(t, "before the purge", p.Before, "create", "get_latest", "list")
	if p.During.Calls > 0 && len(p.P99Ratio) == 0 {
		t.Fatalf("no p99 ratios with %d calls during the purge", p.During.Calls)
	}
	_ = field(t, shape, "purge.p99_during_vs_before")
	for cam := range 5 {
		all := s.singles(t, fmt.Sprintf("load-cam-%06d", cam))
		// The 48 younger seeded half hours, and the images of the run's minutes.
		if n := len(all); n < 49 {
			t.Fatalf("camera %d keeps %d single images, want the 48 younger seeded ones and later", cam, n)
		}
		if oldest := all[len(all)-1].GetCapturedAt().AsTime(); oldest.Before(p.Cutoff.Truncate(time.Minute)) {
			t.Fatalf("camera %d keeps an image of %v, before the cutoff %v", cam, oldest, p.Cutoff)
		}
	}
}

func TestPurgeDuringPurgesAFleetOfItsOwnSeededBefore(t *testing.T) {
	s := startServer(t)
	fleets := []string{"-cameras", "6", "-purge-cameras", "3", "-purge-camera-prefix", "old-cam-", "-types", "single",
		"-days", "2", "-seed-interval", "2h", "-purge-older-than", "26h"}
	// As bench/purge-under-traffic.sh does: the seed first (the server
	// could be compacted between), then purge-during without one.
	code, rep, _, stderr := runTool(t, append([]string{"seed", "-addr", s.addr}, fleets...)...)
	if code != exitOK {
		t.Fatalf("seed: exit %d: %s", code, stderr)
	}
	// 11 images of each old camera's history (two days, but for the last 26
	// hours, every 2 hours; older than the purge's cutoff, and than the
	// server's retention floor of a day), and each live camera's first minute.
	const expired = 3 * 11
	if rep.Seed.Calls != expired+6 || rep.Config.PurgeCameras != 3 {
		t.Fatalf("seed wrote %d images, purge cameras %d", rep.Seed.Calls, rep.Config.PurgeCameras)
	}
	if n := len(s.singles(t, "old-cam-000002")); n != 11 {
		t.Fatalf("old-cam-000002 has %d images, want 11", n)
	}
	if n := len(s.singles(t, "load-cam-000005")); n != 1 {
		t.Fatalf("load-cam-000005 has %d images, want its first minute only", n)
	}
	// A workload of a second, a window of at least two: the workload runs
	// on until the window from the purge's start closes.
	code, rep, shape, stderr := runTool(t, append([]string{"purge-during", "-addr", s.addr, "-skip-seed",
		"-mix", "create=1,get-latest=1", "-rate", "200", "-duration", "1s", "-min-span", "2s", "-concurrency", "4"}, fleets...)...)
	if code != exitOK {
		t.Fatalf("purge-during: exit %d: %s", code, stderr)
	}
	p := rep.Purge
	if rep.Seed != nil || p.MetadataRowsDeleted != expired || p.DevicesTotal != 3 || p.JobSeconds <= 0 || p.JobSeconds > p.Seconds {
		t.Fatalf("seeded again: %v; purge %+v", rep.Seed, p)
	}
	w := p.Window
	if w == nil || w.SpanSeconds < 2 || w.During.CoveredSeconds != w.SpanSeconds || w.Before.CoveredSeconds > w.SpanSeconds {
		t.Fatalf("window: %+v", w)
	}
	for _, name := range []string{"create", "get_latest", allOpsKey} {
		d, b := w.During.RPCs[name], w.Before.RPCs[name]
		if d.Calls == 0 || b.Calls == 0 || d.Errors != 0 || !(0 < d.P99 && d.P99 <= d.P999) || w.P999Ratio[name] <= 0 || w.P99Ratio[name] <= 0 {
			t.Fatalf("%s: during %+v, before %+v, ratios %v %v", name, d, b, w.P99Ratio, w.P999Ratio)
		}
	}
	if all := w.During.RPCs[allOpsKey]; all.Calls != w.During.RPCs["create"].Calls+w.During.RPCs["get_latest"].Calls {
		t.Fatalf("all ops during: %+v of %+v", all, w.During.RPCs)
	}
	_ = field(t, shape, "purge.window.during.rpcs.all.p999")
	_ = field(t, shape, "purge.window.p999_during_vs_before.all")
	if n := len(s.singles(t, "old-cam-000000")); n != 0 {
		t.Fatalf("old-cam-000000 keeps %d images", n)
	}
	if n := len(s.singles(t, "load-cam-000000")); n < 1 {
		t.Fatal("load-cam-000000 lost its first minute to the purge")
	}
}

func TestHistoryMeasuresReadsAtEachDepth(t *testing.T) {
	s := startServer(t)
	code, rep, _, stderr := runTool(t, "history", "-addr", s.addr, "-cameras", "4", "-history-days", "1,3", "-ceiling",
		"-seed-interval", "6h", "-mix", "get-latest=3,list=1,create=5", "-ops", "80", "-concurrency", "2")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if len(rep.History) != 2 || rep.History[0].Images != 5 || rep.History[1].Images != 13 || rep.Seed.Calls != 4*3*13 {
		t.Fatalf("history steps: %+v", rep.History)
	}
	for _, step := range rep.History {
		requireLatencies(t, fmt.Sprintf("%d days", step.Days), step.Reads, "get_latest", "list")
		requireLatencies(t, fmt.Sprintf("ceiling at %d days", step.Days), step.Ceiling, "health_check")
		if step.VsHealth["get_latest_p99_vs_health"] <= 0 {
			t.Fatalf("no get_latest ratio to the ceiling at %d days: %v", step.Days, step.VsHealth)
		}
		if _, ok := step.Reads.RPCs["create"]; ok {
			t.Fatalf("history mode wrote during its measurement at %d days", step.Days)
		}
	}
	if rep.History[1].P99VsFirst["get_latest"] <= 0 {
		t.Fatalf("no p99 ratio at the second depth: %+v", rep.History[1])
	}
	if n := len(s.singles(t, "load-cam-000003")); n != 13 {
		t.Fatalf("camera 3 has %d single images after 3 days every 6h, want 13", n)
	}
}

func TestSoakSamplesServerMemoryAndPassesWithoutErrors(t *testing.T) {
	s := startServer(t)
	code, rep, _, stderr := runTool(t, append([]string{"soak", "-addr", s.addr, "-duration", "1500ms", "-rate", "300", "-rss-interval", "200ms"},
		strings.Fields(fleetArgs)...)...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// The server runs in this process: the tool finds it by its listening port.
	if rep.RSS == nil || rep.RSS.PID != os.Getpid() || len(rep.RSS.Samples) < 3 || rep.RSS.MaxBytes == 0 {
		t.Fatalf("server RSS: %+v", rep.RSS)
	}
	if rep.Errors != 0 || rep.Workload.Calls == 0 {
		t.Fatalf("soak: %d errors, %d calls", rep.Errors, rep.Workload.Calls)
	}
}

func TestSoakFailsWhenCallsFail(t *testing.T) {
	s := startServer(t)
	// The server stops once the fleet is seeded: every later call of the
	// soak fails. A graceful stop lets the seeding creates in flight finish.
	go func() {
		for !s.seeded(30) {
			time.Sleep(20 * time.Millisecond)
		}
		s.srv.Shutdown(context.Background())
	}()
	code, rep, _, stderr := runTool(t, append([]string{"soak", "-addr", s.addr, "-duration", "4s", "-rate", "300", "-server-pid", "-1"},
		strings.Fields(fleetArgs)...)...)
	if code != exitFail || !strings.Contains(stderr, "calls failed") {
		t.Fatalf("soak with a stopped server: exit %d, stderr %q", code, stderr)
	}
	if rep.Errors == 0 || rep.Workload.ErrorsByCode["Unavailable"] == 0 || rep.RSS != nil {
		t.Fatalf("report of the failed soak: %d errors, by code %v; RSS sampled %v with -server-pid -1", rep.Errors, rep.Workload.ErrorsByCode, rep.RSS)
	}
	if c := rep.Workload.CPU; c == nil || c.ServerPID != 0 || c.ServerSeconds != 0 {
		t.Fatalf("server CPU reported with -server-pid -1: %+v", c)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no mode", nil},
		{"unknown mode", []string{"stress"}},
		{"unbounded run", []string{"run", "-duration", "0"}},
		{"seed without days", []string{"seed"}},
		{"purge everything", []string{"purge-during", "-days", "2", "-purge-older-than", "72h"}},
		{"unknown call in mix", []string{"run", "-mix", "create=1,delete=2"}},
		{"unknown image type", []string{"run", "-types", "single,thermal"}},
		{"seed interval below a minute", []string{"seed", "-days", "1", "-seed-interval", "30s"}},
		{"falling history", []string{"history", "-history-days", "7,1"}},
		{"key without certificate", []string{"ceiling", "-tls-key", "k.pem"}},
		{"token twice", []string{"ceiling", "-token", "a", "-token-file", "b"}},
		{"no connection", []string{"run", "-conns", "0"}},
		{"purge fleet in a run", []string{"run", "-purge-cameras", "4"}},
		{"purge fleet is the workload's", []string{"seed", "-days", "1", "-purge-cameras", "4", "-purge-camera-prefix", "load-cam-"}},
		{"no window", []string{"purge-during", "-days", "2", "-min-span", "0s"}},
		{"skip the seed of a seed", []string{"seed", "-days", "1", "-skip-seed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, _, stderr := runTool(t, tc.args...)
			if code != exitUsage || stderr == "" {
				t.Fatalf("exit %d, stderr %q; want %d and a reason", code, stderr, exitUsage)
			}
		})
	}
}

func TestCPUProfileIsWritten(t *testing.T) {
	s := startServer(t)
	path := t.TempDir() + "/cpu.prof"
	code, rep, _, stderr := runTool(t, append([]string{"bench", "-addr", s.addr, "-ops", "200", "-cpuprofile", path}, strings.Fields(fleetArgs)...)...)
	if code != exitOK || rep.Workload.Calls != 200 {
		t.Fatalf("exit %d, report %+v: %s", code, rep.Workload, stderr)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A pprof profile is gzipped protobuf.
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("%s is not a gzipped profile: %d bytes", path, len(b))
	}
}

func TestCreatorReusesItsMessagesWithoutMixingImages(t *testing.T) {
	s := startServer(t)
	cl, err := dial(grpcclient.Config{Addr: s.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.conn.Close()
	f := newFleet(fleetConfig{cameras: 10, prefix: "reuse-", kinds: []kind{single}}, rand.New(rand.NewPCG(1, 2)))
	c := f.creator()
	at := time.Date(2026, 12, 4, 2, 40, 0, 0, time.UTC).Add(f.offset)
	// Camera 9 after camera 1 with the same messages: the second create
	// must not leak into the first image, nor carry any of its fields.
	for _, cam := range []int{1, 9} {
		if err := c.create(t.Context(), cl, single, cam, at.Add(time.Duration(cam)*time.Minute)); err != nil {
			t.Fatalf("create of camera %d: %v", cam, err)
		}
	}
	client := metadatav1.NewSingleImageMetadataServiceClient(s.conn)
	for _, cam := range []int{1, 9} {
		got, err := client.GetLatestSingleImageMetadata(t.Context(), &metadatav1.GetLatestSingleImageMetadataRequest{CameraId: f.ids[cam]})
		if err != nil {
			t.Fatal(err)
		}
		m, capturedAt := got.GetMetadata(), at.Add(time.Duration(cam)*time.Minute)
		n := noise(cam, capturedAt, single)
		wantURI := "https://images.example.net/" + f.ids[cam] + "/" + capturedAt.Format("2006/01/02/1504") + ".jpg"
		if !m.GetCapturedAt().AsTime().Equal(capturedAt) || m.GetBlobUri() != wantURI || m.GetSizeBytes() != 150_000+int64(n%250_000) {
			t.Errorf("camera %d: captured %v, uri %s, size %d; want %v, %s", cam, m.GetCapturedAt().AsTime(), m.GetBlobUri(), m.GetSizeBytes(), capturedAt, wantURI)
		}
		want := maps.Clone(f.attrs[cam])
		want["exposure_ms"] = fmt.Sprint(2 + n%30)
		want["iso"] = fmt.Sprint(100 << (n >> 8 % 4))
		if !maps.Equal(m.GetAttributes(), want) {
			t.Errorf("camera %d attributes %v, want %v", cam, m.GetAttributes(), want)
		}
	}
}

func TestConnsSpreadsWorkersOverConnections(t *testing.T) {
	for _, conns := range []int{1, 3} {
		t.Run(fmt.Sprintf("conns=%d", conns), func(t *testing.T) {
			s := startServer(t)
			code, rep, _, stderr := runTool(t, "bench", "-addr", s.addr, "-cameras", "30", "-concurrency", "6", "-conns", fmt.Sprint(conns),
				"-mix", "create=1", "-types", "single", "-ops", "600")
			if code != exitOK || rep.Workload.Calls != 600 || rep.Errors != 0 || rep.Config.Conns != conns {
				t.Fatalf("exit %d, %+v, conns %d: %s", code, rep.Workload, rep.Config.Conns, stderr)
			}
			// The test's own client has made no call yet: every connection is the tool's.
			got := s.lis.received()
			if len(got) != conns {
				t.Fatalf("the server accepted %d connections, want %d", len(got), conns)
			}
			var total int64
			for _, n := range got {
				total += n
			}
			// Two of the six workers on each: every connection carries a
			// fair share of the creates, not just its handshake.
			for i, n := range got {
				if n < total/int64(conns)/2 {
					t.Errorf("connection %d carried %d of %d bytes: %v", i, n, total, got)
				}
			}
		})
	}
}
