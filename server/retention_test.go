package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // New York's daylight-saving rules, whatever the machine has

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// seedMinutes creates, through the image services, one image per camera per
// minute 0..3 for every kind.
func seedMinutes(t *testing.T, h *harness, cameras int) {
	t.Helper()
	ctx := t.Context()
	for c := range cameras {
		for m := range 4 {
			camera, at := fmt.Sprintf("cam-%d", c), timestamp(minute(m))
			_, err := h.single.CreateSingleImageMetadata(ctx, &metadatav1.CreateSingleImageMetadataRequest{
				Metadata: &metadatav1.SingleImageMetadata{CameraId: camera, CapturedAt: at}})
			requireOK(t, err, "create single")
			_, err = h.pano.CreatePanoImageMetadata(ctx, &metadatav1.CreatePanoImageMetadataRequest{
				Metadata: &metadatav1.PanoImageMetadata{CameraId: camera, CapturedAt: at}})
			requireOK(t, err, "create pano")
			_, err = h.preStitch.CreatePreStitchImageMetadata(ctx, &metadatav1.CreatePreStitchImageMetadataRequest{
				Metadata: &metadatav1.PreStitchImageMetadata{CameraId: camera, CapturedAt: at}})
			requireOK(t, err, "create pre-stitch")
		}
	}
	// Without a transaction (Azure), a purge leaves index rows younger than
	// the creates' bound to the next purge: their primary row might still land.
	time.Sleep(h.indexLag)
}

// watch streams a job to its end and returns every snapshot.
func watch(t *testing.T, h *harness, id string) []*metadatav1.PurgeJob {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), watchPatience)
	defer cancel()
	stream, err := h.retention.WatchPurge(ctx, &metadatav1.WatchPurgeRequest{JobId: id})
	requireOK(t, err, "WatchPurge")
	var out []*metadatav1.PurgeJob
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		requireOK(t, err, "WatchPurge receive")
		out = append(out, resp.GetJob())
	}
}

func singleCount(t *testing.T, h *harness, camera string) int {
	t.Helper()
	resp, err := h.single.ListSingleImageMetadata(t.Context(), &metadatav1.ListSingleImageMetadataRequest{CameraId: camera})
	requireOK(t, err, "list")
	return len(resp.GetMetadata())
}

// TestPurgeOverGRPC walks the README's retention story: a dry run, then a
// purge watched to its end, leaving exactly the young rows.
func TestPurgeOverGRPC(t *testing.T) {
	t.Parallel() // independent: servers and tables of its own
	forEachServer(t, func(t *testing.T, h *harness) {
		const cameras = 3
		seedMinutes(t, h, cameras)
		cutoff := timestamp(minute(2).Add(15 * time.Second)) // minutes 0 and 1 expire

		dry, err := h.retention.StartPurge(t.Context(), &metadatav1.StartPurgeRequest{
			Cutoff: &metadatav1.StartPurgeRequest_CutoffTime{CutoffTime: cutoff}, DryRun: true})
		requireOK(t, err, "dry run")
		if got := len(dry.GetJob().GetImageTypes()); got != 3 {
			t.Fatalf("dry run of no types purges %d types, want all 3", got)
		}
		snaps := watch(t, h, dry.GetJob().GetJobId())
		last := snaps[len(snaps)-1]
		if last.GetState() != metadatav1.PurgeState_PURGE_STATE_SUCCEEDED || !last.GetDryRun() ||
			last.GetMetadataRowsDeleted() != 3*cameras*2 || last.GetIndexRowsDeleted() != 3*cameras*2 || last.GetDevicesTotal() != 3*cameras {
			t.Fatalf("dry run ended %v", last)
		}
		if got := singleCount(t, h, "cam-0"); got != 4 {
			t.Fatalf("after the dry run cam-0 has %d single images, want 4", got)
		}

		started, err := h.retention.StartPurge(t.Context(), &metadatav1.StartPurgeRequest{
			ImageTypes: []metadatav1.ImageType{metadatav1.ImageType_IMAGE_TYPE_SINGLE, metadatav1.ImageType_IMAGE_TYPE_PANO},
			Cutoff:     &metadatav1.StartPurgeRequest_CutoffTime{CutoffTime: cutoff}})
		requireOK(t, err, "StartPurge")
		job := started.GetJob()
		if job.GetState() != metadatav1.PurgeState_PURGE_STATE_PENDING && job.GetState() != metadatav1.PurgeState_PURGE_STATE_RUNNING {
			t.Fatalf("StartPurge returned state %v, want it to run in the background", job.GetState())
		}
		snaps = watch(t, h, job.GetJobId())
		last = snaps[len(snaps)-1]
		if last.GetState() != metadatav1.PurgeState_PURGE_STATE_SUCCEEDED || last.GetDryRun() ||
			last.GetMetadataRowsDeleted() != 2*cameras*2 || last.GetIndexRowsDeleted() != 2*cameras*2 ||
			last.GetDevicesDone() != 2*cameras || last.GetEndTime() == nil || last.GetStartTime() == nil {
			t.Fatalf("purge ended %v", last)
		}
		for _, tc := range last.GetTypeCounts() {
			if tc.GetMetadataRowsDeleted() != cameras*2 || tc.GetIndexRowsDeleted() != cameras*2 {
				t.Errorf("type counts %v, want %d rows of each table", tc, cameras*2)
			}
		}
		for c := range cameras {
			if got := singleCount(t, h, fmt.Sprintf("cam-%d", c)); got != 2 {
				t.Errorf("cam-%d keeps %d single images, want the 2 at or after the cutoff's minute", c, got)
			}
		}
		pre, err := h.preStitch.ListPreStitchImageMetadata(t.Context(), &metadatav1.ListPreStitchImageMetadataRequest{CameraId: "cam-0"})
		requireOK(t, err, "list pre-stitch")
		if len(pre.GetMetadata()) != 4 {
			t.Errorf("pre-stitch, not purged, has %d images, want 4", len(pre.GetMetadata()))
		}

		got, err := h.retention.GetPurge(t.Context(), &metadatav1.GetPurgeRequest{JobId: job.GetJobId()})
		requireOK(t, err, "GetPurge")
		if got.GetJob().GetMetadataRowsDeleted() != last.GetMetadataRowsDeleted() {
			t.Errorf("GetPurge %v differs from the last watched snapshot %v", got.GetJob(), last)
		}
		list, err := h.retention.ListPurges(t.Context(), &metadatav1.ListPurgesRequest{PageSize: 1})
		requireOK(t, err, "ListPurges")
		if len(list.GetJobs()) != 1 || list.GetJobs()[0].GetJobId() != job.GetJobId() || list.GetNextPageToken() == "" {
			t.Fatalf("first page of ListPurges: %v, want the newest job and a token", list)
		}
		next, err := h.retention.ListPurges(t.Context(), &metadatav1.ListPurgesRequest{PageSize: 5, PageToken: list.GetNextPageToken()})
		requireOK(t, err, "ListPurges page 2")
		if len(next.GetJobs()) != 1 || next.GetJobs()[0].GetJobId() != dry.GetJob().GetJobId() || next.GetNextPageToken() != "" {
			t.Fatalf("second page of ListPurges: %v, want the dry run and no token", next)
		}
	})
}

// TestPurgeKeepsVideos: video metadata has no retention (the README says
// why): a purge of every image type leaves a recording older than its
// cutoff in place.
func TestPurgeKeepsVideos(t *testing.T) {
	t.Parallel() // independent: servers and tables of its own
	forEachServer(t, func(t *testing.T, h *harness) {
		seedMinutes(t, h, 1)
		old := mustCreateRecording(t, h, recording("cam-0", minute(0)))
		started, err := h.retention.StartPurge(t.Context(), &metadatav1.StartPurgeRequest{
			Cutoff: &metadatav1.StartPurgeRequest_CutoffTime{CutoffTime: timestamp(minute(2))}})
		requireOK(t, err, "StartPurge")
		snaps := watch(t, h, started.GetJob().GetJobId())
		if last := snaps[len(snaps)-1]; last.GetState() != metadatav1.PurgeState_PURGE_STATE_SUCCEEDED || last.GetMetadataRowsDeleted() != 3*2 {
			t.Fatalf("purge ended %v, want the 6 old images deleted", last)
		}
		resp, err := h.video.ListVideoMetadata(t.Context(), &metadatav1.ListVideoMetadataRequest{CameraId: "cam-0"})
		requireOK(t, err, "ListVideoMetadata")
		requireMessages(t, resp.GetMetadata(), []*metadatav1.VideoMetadata{old})
	})
}

func TestStartPurgeRejectsBadInput(t *testing.T) {
	h := startServer(t, openMemPebble(t))
	future := timestamp(time.Now().Add(time.Hour))
	for _, tc := range []struct {
		name  string
		req   *metadatav1.StartPurgeRequest
		field string
	}{
		{"no cutoff", &metadatav1.StartPurgeRequest{}, "cutoff"},
		{"zero retention days", &metadatav1.StartPurgeRequest{Cutoff: &metadatav1.StartPurgeRequest_RetentionDays{}}, "retention_days"},
		{"negative retention days", &metadatav1.StartPurgeRequest{Cutoff: &metadatav1.StartPurgeRequest_RetentionDays{RetentionDays: -3}}, "retention_days"},
		{"cutoff in the future", &metadatav1.StartPurgeRequest{Cutoff: &metadatav1.StartPurgeRequest_CutoffTime{CutoffTime: future}}, "cutoff_time"},
		{"cutoff before 1601", &metadatav1.StartPurgeRequest{Cutoff: &metadatav1.StartPurgeRequest_CutoffTime{CutoffTime: timestamp(time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC))}}, "cutoff_time"},
		{"unspecified image type", &metadatav1.StartPurgeRequest{ImageTypes: []metadatav1.ImageType{metadatav1.ImageType_IMAGE_TYPE_UNSPECIFIED},
			Cutoff: &metadatav1.StartPurgeRequest_RetentionDays{RetentionDays: 30}}, "image_types[0]"},
		{"unknown image type", &metadatav1.StartPurgeRequest{ImageTypes: []metadatav1.ImageType{metadatav1.ImageType_IMAGE_TYPE_PANO, 42},
			Cutoff: &metadatav1.StartPurgeRequest_RetentionDays{RetentionDays: 30}}, "image_types[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.retention.StartPurge(t.Context(), tc.req)
			requireFieldViolation(t, err, tc.field)
		})
	}
	list, err := h.retention.ListPurges(t.Context(), &metadatav1.ListPurgesRequest{})
	requireOK(t, err, "ListPurges")
	if len(list.GetJobs()) != 0 {
		t.Fatalf("rejected requests recorded jobs: %v", list.GetJobs())
	}
}

func TestUnknownPurgeIsNotFound(t *testing.T) {
	h := startServer(t, openMemPebble(t))
	_, err := h.retention.GetPurge(t.Context(), &metadatav1.GetPurgeRequest{JobId: "0123456789abcdef0123"})
	requireCode(t, err, codes.NotFound)
	_, err = h.retention.GetPurge(t.Context(), &metadatav1.GetPurgeRequest{JobId: "no-such-job"})
	requireCode(t, err, codes.NotFound)
	_, err = h.retention.GetPurge(t.Context(), &metadatav1.GetPurgeRequest{})
	requireFieldViolation(t, err, "job_id")
	stream, err := h.retention.WatchPurge(t.Context(), &metadatav1.WatchPurgeRequest{JobId: "0123456789abcdef0123"})
	requireOK(t, err, "WatchPurge")
	_, err = stream.Recv()
	requireCode(t, err, codes.NotFound)
	_, err = h.retention.ListPurges(t.Context(), &metadatav1.ListPurgesRequest{PageToken: "garbage"})
	requireFieldViolation(t, err, "page_token")
	_, err = h.retention.ListPurges(t.Context(), &metadatav1.ListPurgesRequest{PageSize: -1})
	requireFieldViolation(t, err, "page_size")
}

// TestOverlappingPurgeFailsPrecondition: with the engine stopped, a started
// purge stays pending and holds its types; another purge of one of them is
// refused, naming it.
func TestOverlappingPurgeFailsPrecondition(t *testing.T) {
	h := startServerWith(t, openMemPebble(t), false)
	first, err := h.retention.StartPurge(t.Context(), &metadatav1.StartPurgeRequest{
		ImageTypes: []metadatav1.ImageType{metadatav1.ImageType_IMAGE_TYPE_PANO},
		Cutoff:     &metadatav1.StartPurgeRequest_RetentionDays{RetentionDays: 30}})
	requireOK(t, err, "first purge")
	_, err = h.retention.StartPurge(t.Context(), &metadatav1.StartPurgeRequest{
		Cutoff: &metadatav1.StartPurgeRequest_RetentionDays{RetentionDays: 7}})
	st := requireCode(t, err, codes.FailedPrecondition)
	var named bool
	for _, d := range st.Details() {
		if pf, ok := d.(*errdetails.PreconditionFailure); ok {
			for _, v := range pf.GetViolations() {
				named = named || v.GetSubject() == "purges/"+first.GetJob().GetJobId()
			}
		}
	}
	if !named {
		t.Fatalf("FAILED_PRECONDITION %q does not name the running purge %s in its details", st.Message(), first.GetJob().GetJobId())
	}
	_, err = h.retention.StartPurge(t.Context(), &metadatav1.StartPurgeRequest{
		ImageTypes: []metadatav1.ImageType{metadatav1.ImageType_IMAGE_TYPE_SINGLE},
		Cutoff:     &metadatav1.StartPurgeRequest_RetentionDays{RetentionDays: 7}})
	requireOK(t, err, "purge of another type")
}

// TestRetentionDaysFloorIsConfigurable: a deployment that must keep a week
// of images refuses shorter retentions.
func TestRetentionDaysFloorIsConfigurable(t *testing.T) {
	h := startServerOpts(t, openMemPebble(t), serverOpts{minRetentionDays: 7})
	_, err := h.retention.StartPurge(t.Context(), &metadatav1.StartPurgeRequest{
		Cutoff: &metadatav1.StartPurgeRequest_RetentionDays{RetentionDays: 6}})
	requireFieldViolation(t, err, "retention_days")
	before := time.Now()
	started, err := h.retention.StartPurge(t.Context(), &metadatav1.StartPurgeRequest{
		Cutoff: &metadatav1.StartPurgeRequest_RetentionDays{RetentionDays: 7}, DryRun: true})
	requireOK(t, err, "StartPurge at the floor")
	after := time.Now()
	// The cutoff is now minus seven days, now being when the call ran.
	if cutoff := started.GetJob().GetCutoffTime().AsTime(); cutoff.Before(before.AddDate(0, 0, -7)) || cutoff.After(after.AddDate(0, 0, -7)) {
		t.Fatalf("retention_days 7 at %s gave cutoff %s", before.Format(time.RFC3339), cutoff.Format(time.RFC3339))
	}
}

// TestCutoffTimeFloor: the floor that guards retention_days guards a
// cutoff_time too, dry runs included, so that a cutoff of "now" (or a
// mistyped year) purges nothing: INVALID_ARGUMENT naming cutoff_time and
// the floor, and no job. A cutoff at the floor is accepted.
func TestCutoffTimeFloor(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	for _, tc := range []struct {
		name   string
		floor  int32
		cutoff time.Time
		dryRun bool
		ok     bool
	}{
		{"now", 0, now, false, false},
		{"an hour ago, floor of a day", 0, now.Add(-time.Hour), false, false},
		{"a day ago, floor of a day", 0, now.Add(-24 * time.Hour), false, true},
		{"now, dry run", 7, now, true, false},
		{"a minute short of the floor", 7, now.Add(-7*24*time.Hour + time.Minute), false, false},
		{"at the floor", 7, now.Add(-7 * 24 * time.Hour), true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startServerOpts(t, openMemPebble(t), serverOpts{minRetentionDays: tc.floor, now: clock})
			_, err := h.retention.StartPurge(t.Context(), &metadatav1.StartPurgeRequest{
				Cutoff: &metadatav1.StartPurgeRequest_CutoffTime{CutoffTime: timestamp(tc.cutoff)}, DryRun: tc.dryRun})
			if tc.ok {
				requireOK(t, err, "StartPurge at the floor")
				return
			}
			requireFieldViolation(t, err, "cutoff_time")
			floor := fmt.Sprintf("%d × 24 hours", max(tc.floor, 1))
			if msg := status.Convert(err).Message(); !strings.Contains(msg, floor) {
				t.Errorf("message %q does not name the floor (%s)", msg, floor)
			}
			list, err := h.retention.ListPurges(t.Context(), &metadatav1.ListPurgesRequest{})
			requireOK(t, err, "ListPurges")
			if len(list.GetJobs()) != 0 {
				t.Fatalf("a refused purge recorded jobs: %v", list.GetJobs())
			}
		})
	}
}

// TestRetentionDaysAreWholeDaysInUTC: retention_days N means now minus N x
// 24 hours, the schedule's definition, even when the server's clock reads
// in a zone whose day was 23 hours long (New York on 2026-03-08, when
// daylight-saving time began): no calendar arithmetic in local time.
func TestRetentionDaysAreWholeDaysInUTC(t *testing.T) {
	newYork, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 8, 12, 0, 0, 0, newYork)
	h := startServerOpts(t, openMemPebble(t), serverOpts{now: func() time.Time { return now }})
	for _, days := range []int32{1, 30} {
		started, err := h.retention.StartPurge(t.Context(), &metadatav1.StartPurgeRequest{
			Cutoff: &metadatav1.StartPurgeRequest_RetentionDays{RetentionDays: days}, DryRun: true})
		requireOK(t, err, "StartPurge")
		want := now.Add(-time.Duration(days) * 24 * time.Hour)
		if got := started.GetJob().GetCutoffTime().AsTime(); !got.Equal(want) {
			t.Errorf("retention_days %d at %s gave cutoff %s, want %s (%d x 24 h before)", days, now, got, want.UTC(), days)
		}
	}
}

// TestCancelPurgeOverGRPC: a purge cancelled on a replica that runs no
// purges ends CANCELLED on the replica that does, having deleted nothing;
// ListPurges filters by state, page by page (on Azure a property filter,
// whose pages may come back short); a finished job cannot be cancelled, an
// unknown one is not found; the next purge does the work.
func TestCancelPurgeOverGRPC(t *testing.T) {
	t.Parallel() // independent: servers and tables of its own
	forEachBackend(t, func(t *testing.T, b backend) { testCancelPurge(t, b.open(t)) })
}

func testCancelPurge(t *testing.T, backend store.Backend) {
	idle := startServerWith(t, backend, false)
	seedMinutes(t, idle, 2)
	cutoff := &metadatav1.StartPurgeRequest_CutoffTime{CutoffTime: timestamp(minute(2).Add(15 * time.Second))}
	started, err := idle.retention.StartPurge(t.Context(), &metadatav1.StartPurgeRequest{Cutoff: cutoff})
	requireOK(t, err, "StartPurge")
	id := started.GetJob().GetJobId()
	resp, err := idle.retention.CancelPurge(t.Context(), &metadatav1.CancelPurgeRequest{JobId: id})
	requireOK(t, err, "CancelPurge")
	if j := resp.GetJob(); !j.GetCancelRequested() || j.GetState() != metadatav1.PurgeState_PURGE_STATE_PENDING {
		t.Fatalf("CancelPurge of a pending job returned %v", j)
	}
	// listed walks every page of one job at a time, so that a filter
	// skipping the jobs of other states must carry on across pages.
	listed := func(h *harness, state metadatav1.PurgeState) []string {
		t.Helper()
		var ids []string
		token := ""
		for range 10 {
			list, err := h.retention.ListPurges(t.Context(), &metadatav1.ListPurgesRequest{State: state, PageSize: 1, PageToken: token})
			requireOK(t, err, "ListPurges")
			for _, j := range list.GetJobs() {
				if j.GetState() != state {
					t.Errorf("ListPurges of %v returned a job %v", state, j.GetState())
				}
				ids = append(ids, j.GetJobId())
			}
			if token = list.GetNextPageToken(); token == "" {
				return ids
			}
		}
		t.Fatalf("ListPurges of %v still has a next page after 10 pages of %v", state, ids)
		return nil
	}
	if got := listed(idle, metadatav1.PurgeState_PURGE_STATE_PENDING); len(got) != 1 || got[0] != id {
		t.Fatalf("pending purges %v, want [%s]", got, id)
	}

	running := startServerWith(t, backend, true)
	snaps := watch(t, running, id)
	last := snaps[len(snaps)-1]
	if last.GetState() != metadatav1.PurgeState_PURGE_STATE_CANCELLED || last.GetMetadataRowsDeleted() != 0 ||
		last.GetIndexRowsDeleted() != 0 || last.GetError() == "" || last.GetEndTime() == nil {
		t.Fatalf("cancelled purge ended %v", last)
	}
	if got := singleCount(t, running, "cam-0"); got != 4 {
		t.Fatalf("a purge cancelled before it began left cam-0 %d images, want 4", got)
	}
	_, err = running.retention.CancelPurge(t.Context(), &metadatav1.CancelPurgeRequest{JobId: id})
	requireCode(t, err, codes.FailedPrecondition)
	_, err = running.retention.CancelPurge(t.Context(), &metadatav1.CancelPurgeRequest{JobId: "0123456789abcdef0123"})
	requireCode(t, err, codes.NotFound)
	_, err = running.retention.CancelPurge(t.Context(), &metadatav1.CancelPurgeRequest{})
	requireFieldViolation(t, err, "job_id")

	next, err := running.retention.StartPurge(t.Context(), &metadatav1.StartPurgeRequest{Cutoff: cutoff})
	requireOK(t, err, "next StartPurge")
	snaps = watch(t, running, next.GetJob().GetJobId())
	if last := snaps[len(snaps)-1]; last.GetState() != metadatav1.PurgeState_PURGE_STATE_SUCCEEDED || last.GetMetadataRowsDeleted() != 3*2*2 {
		t.Fatalf("next purge ended %v", last)
	}
	if got := singleCount(t, running, "cam-0"); got != 2 {
		t.Fatalf("after the next purge cam-0 has %d images, want 2", got)
	}
	if got := listed(running, metadatav1.PurgeState_PURGE_STATE_CANCELLED); len(got) != 1 || got[0] != id {
		t.Errorf("cancelled purges %v, want [%s]", got, id)
	}
	if got := listed(running, metadatav1.PurgeState_PURGE_STATE_SUCCEEDED); len(got) != 1 || got[0] != next.GetJob().GetJobId() {
		t.Errorf("succeeded purges %v, want [%s]", got, next.GetJob().GetJobId())
	}
	if got := listed(running, metadatav1.PurgeState_PURGE_STATE_PENDING); len(got) != 0 {
		t.Errorf("pending purges %v after both ended, want none", got)
	}
	page, err := running.retention.ListPurges(t.Context(), &metadatav1.ListPurgesRequest{PageSize: 1})
	requireOK(t, err, "ListPurges page 1")
	_, err = running.retention.ListPurges(t.Context(), &metadatav1.ListPurgesRequest{
		PageToken: page.GetNextPageToken(), State: metadatav1.PurgeState_PURGE_STATE_CANCELLED})
	requireFieldViolation(t, err, "page_token")
	_, err = running.retention.ListPurges(t.Context(), &metadatav1.ListPurgesRequest{State: 42})
	requireFieldViolation(t, err, "state")
}

// TestRetentionScheduleOverGRPC: pausing the schedule on one replica is
// what every replica reads, until it is resumed; each replica reports its
// own configured schedule.
func TestRetentionScheduleOverGRPC(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) { testRetentionSchedule(t, b.open(t)) })
}

func testRetentionSchedule(t *testing.T, backend store.Backend) {
	scheduled := startServerOpts(t, backend, serverOpts{schedule: retention.Schedule{Retention: policy.Days(30), Interval: time.Hour}})
	plain := startServerWith(t, backend, false)
	got, err := scheduled.retention.GetRetentionSchedule(t.Context(), &metadatav1.GetRetentionScheduleRequest{})
	requireOK(t, err, "GetRetentionSchedule")
	if s := got.GetSchedule(); !s.GetConfigured() || s.GetRetentionDays() != 30 || s.GetInterval().AsDuration() != time.Hour ||
		s.GetPaused() || s.GetUpdateTime() != nil {
		t.Fatalf("schedule before any pause: %v", s)
	}
	paused, err := plain.retention.PauseRetentionSchedule(t.Context(), &metadatav1.PauseRetentionScheduleRequest{})
	requireOK(t, err, "PauseRetentionSchedule")
	if s := paused.GetSchedule(); !s.GetPaused() || s.GetConfigured() || s.GetUpdateTime() == nil {
		t.Fatalf("pause on a replica without a schedule returned %v", s)
	}
	got, err = scheduled.retention.GetRetentionSchedule(t.Context(), &metadatav1.GetRetentionScheduleRequest{})
	requireOK(t, err, "GetRetentionSchedule")
	if s := got.GetSchedule(); !s.GetPaused() || !s.GetConfigured() || !s.GetUpdateTime().AsTime().Equal(paused.GetSchedule().GetUpdateTime().AsTime()) {
		t.Fatalf("the other replica reads %v after the pause", s)
	}
	resumed, err := scheduled.retention.ResumeRetentionSchedule(t.Context(), &metadatav1.ResumeRetentionScheduleRequest{})
	requireOK(t, err, "ResumeRetentionSchedule")
	if s := resumed.GetSchedule(); s.GetPaused() || !s.GetConfigured() {
		t.Fatalf("resume returned %v", s)
	}
	got, err = plain.retention.GetRetentionSchedule(t.Context(), &metadatav1.GetRetentionScheduleRequest{})
	requireOK(t, err, "GetRetentionSchedule")
	if got.GetSchedule().GetPaused() {
		t.Fatalf("the other replica reads %v after the resume", got.GetSchedule())
	}
}

// TestPurgeRateIsValidatedAndKept: a negative rate is refused; a job's rate
// is recorded on it and paces its deletes, and a capped purge still retires
// exactly the expired. That the cap paces every deleted row, primary and
// index, is store/retention's TestPurgePacesEveryDeletedRow.
func TestPurgeRateIsValidatedAndKept(t *testing.T) {
	t.Parallel() // independent: servers and tables of its own
	forEachServer(t, func(t *testing.T, h *harness) {
		cutoff := &metadatav1.StartPurgeRequest_CutoffTime{CutoffTime: timestamp(minute(2).Add(15 * time.Second))}
		_, err := h.retention.StartPurge(t.Context(), &metadatav1.StartPurgeRequest{Cutoff: cutoff, RowsPerSecond: -1})
		requireFieldViolation(t, err, "rows_per_second")
		seedMinutes(t, h, 2)
		// The cap reaches the engine and stays on the job; how it paces the
		// deletes is store/retention's TestPacedPurgeTakesItsRowsOverItsRate,
		// in virtual time.
		const rate, rows = 1000, 3 * 2 * 2 * 2
		started, err := h.retention.StartPurge(t.Context(), &metadatav1.StartPurgeRequest{Cutoff: cutoff, RowsPerSecond: rate})
		requireOK(t, err, "StartPurge")
		snaps := watch(t, h, started.GetJob().GetJobId())
		last := snaps[len(snaps)-1]
		if last.GetState() != metadatav1.PurgeState_PURGE_STATE_SUCCEEDED ||
			last.GetRowsPerSecond() != rate || last.GetMetadataRowsDeleted()+last.GetIndexRowsDeleted() != rows {
			t.Fatalf("capped purge ended %v", last)
		}
	})
}
