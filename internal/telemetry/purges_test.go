package telemetry_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/metadatad/metadatad/internal/telemetry"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// endedPurges is a purge engine that has ended jobs in every final state.
type endedPurges struct{ ended map[retention.State]int64 }

func (p endedPurges) Stats() retention.Stats { return retention.Stats{Ended: p.ended} }
func (p endedPurges) Status(context.Context) (retention.Status, error) {
	return retention.Status{}, nil
}
func (p endedPurges) Now() time.Time       { return time.Now() }
func (p endedPurges) Kinds() []images.Kind { return images.Kinds }

// TestPurgeEndStates: every final state is a series of
// metadatad_purge_jobs_ended_total, cancelled included, each from 0.
func TestPurgeEndStates(t *testing.T) {
	m := telemetry.NewMetrics()
	m.WatchPurges(endedPurges{ended: map[retention.State]int64{retention.Succeeded: 3, retention.Cancelled: 2}}, telemetry.PurgeOptions{})
	want := `
# HELP metadatad_purge_jobs_ended_total Purge jobs this process ended, by final state (succeeded, failed, cancelled), dry runs included.
# TYPE metadatad_purge_jobs_ended_total counter
metadatad_purge_jobs_ended_total{state="cancelled"} 2
metadatad_purge_jobs_ended_total{state="failed"} 0
metadatad_purge_jobs_ended_total{state="succeeded"} 3
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "metadatad_purge_jobs_ended_total"); err != nil {
		t.Error(err)
	}
}

// TestBuildInfo: metadatad_build_info is 1, labelled with the build.
func TestBuildInfo(t *testing.T) {
	m := telemetry.NewMetrics()
	m.SetBuildInfo("v1.2.3", "abc123", "go1.26.8")
	want := `
# HELP metadatad_build_info Always 1; its labels are the module version, VCS revision and Go version of the binary.
# TYPE metadatad_build_info gauge
metadatad_build_info{goversion="go1.26.8",revision="abc123",version="v1.2.3"} 1
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "metadatad_build_info"); err != nil {
		t.Error(err)
	}
}

// statusPurges is a purge engine whose store reads give status, at now.
type statusPurges struct {
	status retention.Status
	now    time.Time
}

func (p statusPurges) Stats() retention.Stats                           { return retention.Stats{} }
func (p statusPurges) Status(context.Context) (retention.Status, error) { return p.status, nil }
func (p statusPurges) Now() time.Time                                   { return p.now }
func (p statusPurges) Kinds() []images.Kind                             { return []images.Kind{images.Single, images.Pano} }

// TestRetentionSignals: the time since a success is there from the start,
// counted from the process's start with no purge in the store, from the
// oldest purge when none succeeded, else from the latest success; the
// oldest-row gauge is left out whenever rules (policies, tiers, holds)
// may keep rows past one retention, so that it never counts them as overdue.
func TestRetentionSignals(t *testing.T) {
	now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	old := map[images.Kind]time.Time{images.Single: now.Add(-40 * day), images.Pano: now.Add(-40 * day)}
	for _, tc := range []struct {
		name      string
		status    retention.Status
		retention time.Duration
		want      string
	}{
		{name: "no purge ever", status: retention.Status{Oldest: old}, want: `
metadatad_purge_since_success_seconds{kind="pano"} 259200
metadatad_purge_since_success_seconds{kind="single"} 259200
`},
		{name: "purges that all failed", status: retention.Status{Oldest: old, FirstPurge: now.Add(-5 * day)}, want: `
metadatad_purge_since_success_seconds{kind="pano"} 432000
metadatad_purge_since_success_seconds{kind="single"} 432000
`},
		{name: "by policy, thinning", retention: 0, status: retention.Status{Oldest: old, FirstPurge: now.Add(-9 * day),
			LastSucceeded: map[images.Kind]time.Time{images.Single: now.Add(-time.Hour)}}, want: `
metadatad_purge_since_success_seconds{kind="pano"} 777600
metadatad_purge_since_success_seconds{kind="single"} 3600
`},
		{name: "one retention", retention: 30 * day, status: retention.Status{Oldest: old, FirstPurge: now.Add(-9 * day),
			LastSucceeded: map[images.Kind]time.Time{images.Single: now, images.Pano: now}}, want: `
metadatad_purge_oldest_row_past_cutoff_seconds{kind="pano"} 864000
metadatad_purge_oldest_row_past_cutoff_seconds{kind="single"} 864000
metadatad_purge_since_success_seconds{kind="pano"} 0
metadatad_purge_since_success_seconds{kind="single"} 0
`},
		{name: "one retention, a camera on hold", retention: 30 * day, status: retention.Status{Oldest: old, Held: true,
			LastSucceeded: map[images.Kind]time.Time{images.Single: now, images.Pano: now}}, want: `
metadatad_purge_since_success_seconds{kind="pano"} 0
metadatad_purge_since_success_seconds{kind="single"} 0
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := telemetry.NewMetrics()
			m.WatchPurges(statusPurges{status: tc.status, now: now},
				telemetry.PurgeOptions{Retention: tc.retention, Started: now.Add(-3 * day)})
			if got := seriesLines(t, m, "metadatad_purge_since_success_seconds", "metadatad_purge_oldest_row_past_cutoff_seconds"); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// seriesLines formats the named families' series, one "name{labels} value"
// a line, in the registry's order, between newlines.
func seriesLines(t *testing.T, m *telemetry.Metrics, names ...string) string {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("\n")
	for _, f := range families {
		if !slices.Contains(names, f.GetName()) {
			continue
		}
		for _, s := range f.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			fmt.Fprintf(&b, "%s{%s} %g\n", f.GetName(), strings.Join(labels, ","), s.GetGauge().GetValue())
		}
	}
	return b.String()
}
