package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
)

// TestMetricsEndpoint runs a few calls and a purge against a daemon with
// -metrics-listen and finds the named series with the values they must have.
func TestMetricsEndpoint(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "-metrics-listen", "127.0.0.1:0")
	if d.metricsAddr == "" {
		t.Fatal("no metrics address logged")
	}
	conn := d.conn(t)
	singles := metadatav1.NewSingleImageMetadataServiceClient(conn)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 4 {
		if _, err := singles.CreateSingleImageMetadata(t.Context(), &metadatav1.CreateSingleImageMetadataRequest{
			Metadata: &metadatav1.SingleImageMetadata{CameraId: "cam-1", CapturedAt: timestamppb.New(base.Add(time.Duration(i) * time.Minute))}}); err != nil {
			t.Fatal(err)
		}
	}
	// A pano no purge touches: its oldest row stays past the cutoff.
	if _, err := metadatav1.NewPanoImageMetadataServiceClient(conn).CreatePanoImageMetadata(t.Context(), &metadatav1.CreatePanoImageMetadataRequest{
		Metadata: &metadatav1.PanoImageMetadata{CameraId: "cam-1", CapturedAt: timestamppb.New(base)}}); err != nil {
		t.Fatal(err)
	}
	_, err := singles.GetLatestSingleImageMetadata(t.Context(), &metadatav1.GetLatestSingleImageMetadataRequest{CameraId: "nobody"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("latest of an unknown camera: %v, want NOT_FOUND", err)
	}

	purges := metadatav1.NewRetentionServiceClient(conn)
	started, err := purges.StartPurge(t.Context(), &metadatav1.StartPurgeRequest{
		ImageTypes: []metadatav1.ImageType{metadatav1.ImageType_IMAGE_TYPE_SINGLE},
		Cutoff:     &metadatav1.StartPurgeRequest_CutoffTime{CutoffTime: timestamppb.New(base.Add(2 * time.Minute))}})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := purges.WatchPurge(t.Context(), &metadatav1.WatchPurgeRequest{JobId: started.GetJob().GetJobId()})
	if err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetJob().GetState() == metadatav1.PurgeState_PURGE_STATE_FAILED {
			t.Fatalf("purge failed: %v", resp.GetJob())
		}
	}

	// The stream ends when the store shows the job's end, which may be a
	// moment before the engine has counted it.
	families := scrape(t, d.metricsAddr)
	for deadline := time.Now().Add(10 * time.Second); families[`metadatad_purge_jobs_ended_total{state="succeeded"}`] < 1 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		families = scrape(t, d.metricsAddr)
	}
	const create = `grpc_method="CreateSingleImageMetadata",grpc_service="metadata.v1.SingleImageMetadataService"`
	exact := map[string]float64{
		`grpc_server_handled_total{grpc_code="OK",` + create + `,grpc_type="unary"}`:                                                                                         4,
		`grpc_server_handled_total{grpc_code="NotFound",grpc_method="GetLatestSingleImageMetadata",grpc_service="metadata.v1.SingleImageMetadataService",grpc_type="unary"}`: 1,
		// Pre-initialised: a method never called has its series at zero.
		`grpc_server_handled_total{grpc_code="OK",grpc_method="ListVideoMetadata",grpc_service="metadata.v1.VideoMetadataService",grpc_type="unary"}`: 0,
		`grpc_server_handling_seconds_count{` + create + `,grpc_type="unary"}`:                                                                        4,
		`metadatad_purge_jobs_ended_total{state="succeeded"}`:                                                                                         1,
		`metadatad_purge_jobs_ended_total{state="failed"}`:                                                                                            0,
		`metadatad_purge_jobs_ended_total{state="cancelled"}`:                                                                                         0,
		`metadatad_purge_rows_deleted_total{table="SingleImageMetadata"}`:                                                                             2,
		`metadatad_purge_rows_deleted_total{table="SingleImageMetadataIndex"}`:                                                                        2,
		`metadatad_purge_devices_failed_total`:                                                                                                        0,
		`metadatad_purge_status_up`:                                                                                                                   1,
		`metadatad_purge_oldest_row_past_cutoff_seconds{kind="pre-stitch"}`:                                                                           0,
	}
	build := readBuildInfo()
	exact[fmt.Sprintf(`metadatad_build_info{goversion=%q,revision=%q,version=%q}`, build.GoVersion, build.Revision, build.Version)] = 1
	for series, want := range exact {
		if got, ok := families[series]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	if _, ok := families[`metadatad_purge_queue_depth`]; ok {
		t.Error("metadatad_purge_queue_depth is exported, but the embedded store purges without a queue")
	}
	positive := []string{
		`metadatad_store_operation_duration_seconds_count{backend="embedded",operation="transact"}`,
		`metadatad_store_operation_duration_seconds_count{backend="embedded",operation="purge"}`,
		`metadatad_pebble_disk_usage_bytes`,
		`metadatad_tally_complete{table="SingleImageMetadata"}`,
		`metadatad_purge_last_success_timestamp_seconds{kind="single"}`,
		`metadatad_purge_retention_seconds`,
		`go_goroutines`,
		`process_resident_memory_bytes`,
	}
	for _, series := range positive {
		if families[series] <= 0 {
			t.Errorf("%s = %v, want a positive value", series, families[series])
		}
	}
	for _, series := range []string{`metadatad_pebble_read_amplification`, `metadatad_pebble_compaction_debt_bytes`,
		`metadatad_pebble_block_cache_hits_total`, `metadatad_pebble_block_cache_misses_total`, `metadatad_pebble_block_cache_size_bytes`} {
		if _, ok := families[series]; !ok {
			t.Errorf("%s missing", series)
		}
	}
	// The purge cut at base+2m; the remaining single rows are at the cutoff,
	// the pano at base, two minutes past it.
	if got := families[`metadatad_purge_oldest_row_past_cutoff_seconds{kind="single"}`]; got >= 120 {
		t.Errorf("single's oldest row %vs past the cutoff right after its purge, want under 120", got)
	}
	if got := families[`metadatad_purge_oldest_row_past_cutoff_seconds{kind="pano"}`]; got < 120 {
		t.Errorf("pano's oldest row %vs past the cutoff, want at least 120", got)
	}
	// No pano purge ever succeeded: the time since one counts from the
	// single purge, the store's first, and is there for the alert.
	if _, ok := families[`metadatad_purge_since_success_seconds{kind="pano"}`]; !ok {
		t.Error("metadatad_purge_since_success_seconds{kind=\"pano\"} missing before any pano purge")
	}

	// An open feed shows in the stream gauges (the server admits it
	// before its first message, which start_with_latest sends); the free-space
	// guard, with room, reads 0.
	feedCtx, closeFeed := context.WithCancel(t.Context())
	defer closeFeed()
	feed, err := singles.WatchSingleImageMetadata(feedCtx, &metadatav1.WatchSingleImageMetadataRequest{CameraIds: []string{"cam-1"}, StartWithLatest: true})
	if err == nil {
		_, err = feed.Recv()
	}
	if err != nil {
		t.Fatal(err)
	}
	families = scrape(t, d.metricsAddr)
	for series, want := range map[string]float64{`metadatad_streams_open{stream="image_feed"}`: 1,
		`metadatad_streams_open{stream="watch_purge"}`: 0, `metadatad_streams_open{stream="watch_deleted_images"}`: 0, `metadatad_free_space_low`: 0} {
		if got, ok := families[series]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	closeFeed()

	// A camera on hold keeps its rows past any cutoff: no row is overdue.
	if _, err := purges.CreateLegalHold(t.Context(), &metadatav1.CreateLegalHoldRequest{
		LegalHold: &metadatav1.LegalHold{Name: "legalHolds/cam-1", Reason: "case 7"}}); err != nil {
		t.Fatal(err)
	}
	families = scrape(t, d.metricsAddr)
	if got, ok := families[`metadatad_purge_oldest_row_past_cutoff_seconds{kind="pano"}`]; ok {
		t.Errorf("with a camera on hold, pano's oldest row is %vs past the cutoff, want the gauge left out", got)
	}
}

// scrape reads /metrics into a map from series, as name{labels sorted},
// to value; a histogram gives its _count.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			series := name
			if len(labels) > 0 {
				series += "{" + strings.Join(labels, ",") + "}"
			}
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM:
				out[strings.Replace(series, name, name+"_count", 1)] = float64(m.GetHistogram().GetSampleCount())
			case dto.MetricType_COUNTER:
				out[series] = m.GetCounter().GetValue()
			default:
				out[series] = m.GetGauge().GetValue() + m.GetUntyped().GetValue()
			}
		}
	}
	return out
}
