package telemetry_test

import (
	"context"
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
