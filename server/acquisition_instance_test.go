package server_test

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store"
)

const (
	pending    = metadatav1.RuntimeStatus_RUNTIME_STATUS_PENDING
	running    = metadatav1.RuntimeStatus_RUNTIME_STATUS_RUNNING
	completed  = metadatav1.RuntimeStatus_RUNTIME_STATUS_COMPLETED
	failed     = metadatav1.RuntimeStatus_RUNTIME_STATUS_FAILED
	terminated = metadatav1.RuntimeStatus_RUNTIME_STATUS_TERMINATED
)

// now is the control plane's clock in the acquisition tests.
var now = time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)

// run is an instance of device cam-1 created an hour before now.
func run(id string, status metadatav1.RuntimeStatus, updated time.Time) *metadatav1.AcquisitionInstance {
	return &metadatav1.AcquisitionInstance{InstanceId: id, DeviceId: "cam-1", RuntimeStatus: status,
		CreateTime: timestamppb.New(now.Add(-time.Hour)), LastUpdateTime: timestamppb.New(updated)}
}

func mustRecord(t *testing.T, h *harness, in *metadatav1.AcquisitionInstance) *metadatav1.AcquisitionInstance {
	t.Helper()
	resp, err := h.acquisition.RecordAcquisitionInstance(t.Context(), &metadatav1.RecordAcquisitionInstanceRequest{Instance: in})
	requireOK(t, err, "record "+in.GetInstanceId())
	return resp.GetInstance()
}

// listActive lists every page of the active instances within the window,
// pageSize at a time, and checks that only the last page lacks a token.
func listActive(t *testing.T, h *harness, within time.Duration, pageSize int32) []*metadatav1.AcquisitionInstance {
	t.Helper()
	req := &metadatav1.ListActiveAcquisitionInstancesRequest{Within: durationpb.New(within), PageSize: pageSize}
	var out []*metadatav1.AcquisitionInstance
	for range maxPages {
		resp, err := h.acquisition.ListActiveAcquisitionInstances(t.Context(), req)
		requireOK(t, err, "list active instances")
		out = append(out, resp.GetInstances()...)
		if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
			return out
		}
		if pageSize > 0 && len(resp.GetInstances()) != int(pageSize) {
			t.Fatalf("page of %d instances, want a full page of %d", len(resp.GetInstances()), pageSize)
		}
	}
	t.Fatalf("more than %d pages", maxPages)
	return nil
}

func instanceIDs(ins []*metadatav1.AcquisitionInstance) []string {
	ids := make([]string, len(ins))
	for i, in := range ins {
		ids[i] = in.GetInstanceId()
	}
	return ids
}

// TestRecordAcquisitionInstance records instances and checks what is
// returned, stored and listed after each record.
func TestRecordAcquisitionInstance(t *testing.T) {
	steps := []struct {
		name string
		in   *metadatav1.AcquisitionInstance
		// want is the instance as returned.
		want *metadatav1.AcquisitionInstance
		// active are the rows of the active table after the step.
		active []string
	}{
		{
			name:   "new pending instance",
			in:     run("run-1", pending, now.Add(-90*time.Second).Add(123)),
			want:   run("run-1", pending, now.Add(-90*time.Second).Add(100)),
			active: []string{"202601010058/run-1"},
		},
		{
			name: "times default to the clock",
			in:   &metadatav1.AcquisitionInstance{InstanceId: "run-2", DeviceId: "cam-2", RuntimeStatus: running},
			want: &metadatav1.AcquisitionInstance{InstanceId: "run-2", DeviceId: "cam-2", RuntimeStatus: running,
				CreateTime: timestamppb.New(now), LastUpdateTime: timestamppb.New(now)},
			active: []string{"202601010058/run-1", "202601010100/run-2"},
		},
		{
			name:   "running, updated in another minute: the active row moves",
			in:     &metadatav1.AcquisitionInstance{InstanceId: "run-1", DeviceId: "cam-1", RuntimeStatus: running, LastUpdateTime: timestamppb.New(now.Add(-30 * time.Second))},
			want:   run("run-1", running, now.Add(-30*time.Second)),
			active: []string{"202601010059/run-1", "202601010100/run-2"},
		},
		{
			name:   "updated again in the same minute",
			in:     run("run-1", running, now.Add(-10*time.Second)),
			want:   run("run-1", running, now.Add(-10*time.Second)),
			active: []string{"202601010059/run-1", "202601010100/run-2"},
		},
		{
			name:   "completed: the active row goes",
			in:     run("run-1", completed, now),
			want:   run("run-1", completed, now),
			active: []string{"202601010100/run-2"},
		},
		{
			name:   "a durable-entity instance has no active row",
			in:     run("@camerastate@cam-1", running, now),
			want:   run("@camerastate@cam-1", running, now),
			active: []string{"202601010100/run-2"},
		},
		{
			name:   "terminated",
			in:     run("run-2", terminated, now),
			want:   run("run-2", terminated, now),
			active: nil,
		},
		{
			name:   "a finished instance may run again",
			in:     run("run-2", running, now),
			want:   run("run-2", running, now),
			active: []string{"202601010100/run-2"},
		},
	}
	forEachServer(t, func(t *testing.T, h *harness) {
		h.clock.set(now)
		for _, step := range steps {
			t.Run(step.name, func(t *testing.T) {
				got := mustRecord(t, h, step.in)
				if !proto.Equal(got, step.want) {
					t.Fatalf("recorded %v\nwant     %v", got, step.want)
				}
				var active []string
				for _, e := range h.rows(t, "ImageAcquisitionInstanceActive") {
					active = append(active, e.PartitionKey+"/"+e.RowKey)
				}
				if fmt.Sprint(active) != fmt.Sprint(step.active) {
					t.Fatalf("active rows %v, want %v", active, step.active)
				}
			})
		}
		t.Run("one instance row per instance", func(t *testing.T) {
			rows := h.rows(t, "ImageAcquisitionInstance")
			if got := rowKeys(rows); got != "[@camerastate@cam-1/instance run-1/instance run-2/instance]" {
				t.Fatalf("instance rows %s", got)
			}
			p := rows[1].Properties
			if p["DeviceId"] != "cam-1" || p["RuntimeStatus"] != "Completed" || p["CreatedTime"] != now.Add(-time.Hour) || p["LastUpdatedTime"] != now {
				t.Errorf("row properties %v", p)
			}
		})
	})
}

// TestListActiveAcquisitionInstances checks the status filter, the window
// and the exclusion of durable-entity instances.
func TestListActiveAcquisitionInstances(t *testing.T) {
	instances := []*metadatav1.AcquisitionInstance{
		run("pending", pending, now.Add(-2*time.Minute)),
		run("running", running, now.Add(-30*time.Second)),
		run("completed", completed, now.Add(-time.Minute)),
		run("failed", failed, now.Add(-time.Minute)),
		run("terminated", terminated, now.Add(-time.Minute)),
		run("@camerastate@cam-1", running, now.Add(-10*time.Second)),
		run("@camerastate@cam-2", pending, now.Add(-10*time.Second)),
		run("old", running, now.Add(-2*time.Hour)),
		run("edge", running, now.Add(-10*time.Minute)),
		run("early-in-minute", running, now.Add(-10*time.Minute-50*time.Second)),
		run("ahead", pending, now.Add(5*time.Minute)),
		run("also-running", running, now.Add(-30*time.Second)),
		// An id that sorts among the durable-entity ones without being one.
		run("@camerastatus", running, now.Add(-10*time.Second)),
	}
	cases := []struct {
		name   string
		within time.Duration
		want   []string
	}{
		{name: "one minute", within: time.Minute, want: []string{"@camerastatus", "also-running", "running", "ahead"}},
		{name: "three minutes", within: 3 * time.Minute, want: []string{"pending", "@camerastatus", "also-running", "running", "ahead"}},
		{name: "update at the window's start is in", within: 10 * time.Minute,
			want: []string{"edge", "pending", "@camerastatus", "also-running", "running", "ahead"}},
		{name: "update 1 ns before the window's start is out", within: 10*time.Minute - 1,
			want: []string{"pending", "@camerastatus", "also-running", "running", "ahead"}},
		{name: "start inside a minute leaves its earlier updates out", within: 10*time.Minute + 30*time.Second,
			want: []string{"edge", "pending", "@camerastatus", "also-running", "running", "ahead"}},
		{name: "a day", within: 24 * time.Hour,
			want: []string{"old", "early-in-minute", "edge", "pending", "@camerastatus", "also-running", "running", "ahead"}},
		{name: "1 ns", within: 1, want: []string{"ahead"}},
	}
	forEachServer(t, func(t *testing.T, h *harness) {
		h.clock.set(now)
		for _, in := range instances {
			mustRecord(t, h, in)
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				got := listActive(t, h, tc.within, 0)
				if ids := instanceIDs(got); fmt.Sprint(ids) != fmt.Sprint(tc.want) {
					t.Fatalf("listed %q, want %q", ids, tc.want)
				}
				for _, in := range got {
					for _, want := range instances {
						if want.GetInstanceId() == in.GetInstanceId() && !proto.Equal(in, want) {
							t.Errorf("listed %v, recorded %v", in, want)
						}
					}
				}
			})
		}
		t.Run("the window follows the clock", func(t *testing.T) {
			h.clock.set(now.Add(time.Hour))
			defer h.clock.set(now)
			if ids := instanceIDs(listActive(t, h, time.Hour, 0)); fmt.Sprint(ids) != "[ahead]" {
				t.Fatalf("an hour later, the last hour lists %q, want [ahead]", ids)
			}
		})
	})
}

// TestListActiveSkipsStaleRows plants active rows that no longer match
// their instances, as a crash between the writes of a record leaves them
// on a backend without transactions: listings skip them and still fill
// their pages.
func TestListActiveSkipsStaleRows(t *testing.T) {
	forEachServer(t, func(t *testing.T, h *harness) {
		h.clock.set(now)
		var want []string
		for i := range 6 {
			id := fmt.Sprintf("run-%d", i)
			mustRecord(t, h, run(id, running, now.Add(-time.Minute)))
			want = append(want, id)
		}
		mustRecord(t, h, run("done", completed, now.Add(-time.Minute)))
		active, err := h.backend.Table(t.Context(), "ImageAcquisitionInstanceActive")
		requireOK(t, err, "open active table")
		for _, stale := range []store.Key{
			{PartitionKey: "202601010059", RowKey: "done"},  // ended since
			{PartitionKey: "202601010059", RowKey: "ghost"}, // never recorded
			{PartitionKey: "202601010058", RowKey: "run-3"}, // an older minute
			{PartitionKey: "202601010059", RowKey: "run-00"},
		} {
			_, err := active.Upsert(t.Context(), store.Entity{PartitionKey: stale.PartitionKey, RowKey: stale.RowKey,
				Properties: store.Properties{"RuntimeStatus": "Running"}}, store.Replace)
			requireOK(t, err, "plant stale row")
		}
		for _, size := range []int32{1, 2, 4, 0} {
			t.Run(fmt.Sprintf("pages of %d", size), func(t *testing.T) {
				if ids := instanceIDs(listActive(t, h, time.Hour, size)); fmt.Sprint(ids) != fmt.Sprint(want) {
					t.Fatalf("listed %q, want %q", ids, want)
				}
			})
		}
	})
}

// TestListActivePaging pages through 60 instances over 30 minutes and
// checks that each is listed once, in order.
func TestListActivePaging(t *testing.T) {
	forEachServer(t, func(t *testing.T, h *harness) {
		h.clock.set(now)
		var want []string
		for m := 30; m > 0; m-- {
			for _, suffix := range []string{"a", "b"} {
				id := fmt.Sprintf("run-%02d%s", m, suffix)
				mustRecord(t, h, run(id, running, now.Add(-time.Duration(m)*time.Minute)))
				want = append(want, id)
			}
		}
		for _, size := range []int32{1, 7, 60, 1000} {
			t.Run(fmt.Sprintf("pages of %d", size), func(t *testing.T) {
				if ids := instanceIDs(listActive(t, h, time.Hour, size)); fmt.Sprint(ids) != fmt.Sprint(want) {
					t.Fatalf("listed %q\nwant   %q", ids, want)
				}
			})
		}
	})
}

// TestAcquisitionBadInput checks that every bad request gets
// INVALID_ARGUMENT naming the field, and writes nothing.
func TestAcquisitionBadInput(t *testing.T) {
	record := func(change func(in *metadatav1.AcquisitionInstance)) func(t *testing.T, h *harness) error {
		return func(t *testing.T, h *harness) error {
			in := run("run-9", running, now)
			change(in)
			_, err := h.acquisition.RecordAcquisitionInstance(t.Context(), &metadatav1.RecordAcquisitionInstanceRequest{Instance: in})
			return err
		}
	}
	list := func(req *metadatav1.ListActiveAcquisitionInstancesRequest) func(t *testing.T, h *harness) error {
		return func(t *testing.T, h *harness) error {
			_, err := h.acquisition.ListActiveAcquisitionInstances(t.Context(), req)
			return err
		}
	}
	// listWithTokenOf lists with a window of an hour and the token of another query.
	listWithTokenOf := func(token func(t *testing.T, h *harness) string) func(t *testing.T, h *harness) error {
		return func(t *testing.T, h *harness) error {
			_, err := h.acquisition.ListActiveAcquisitionInstances(t.Context(), &metadatav1.ListActiveAcquisitionInstancesRequest{
				Within: durationpb.New(time.Hour), PageToken: token(t, h)})
			return err
		}
	}
	beforeMin := timestamppb.New(time.Date(1600, 12, 31, 0, 0, 0, 0, time.UTC))
	afterMax := timestamppb.New(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
	cases := []badCall{
		{"record without instance", "instance", func(t *testing.T, h *harness) error {
			_, err := h.acquisition.RecordAcquisitionInstance(t.Context(), &metadatav1.RecordAcquisitionInstanceRequest{})
			return err
		}},
		{"record without runtime_status", "instance.runtime_status", record(func(in *metadatav1.AcquisitionInstance) { in.RuntimeStatus = 0 })},
		{"record unknown runtime_status", "instance.runtime_status", record(func(in *metadatav1.AcquisitionInstance) { in.RuntimeStatus = 42 })},
		{"record create_time before 1601-01-01", "instance.create_time", record(func(in *metadatav1.AcquisitionInstance) { in.CreateTime = beforeMin })},
		{"record last_update_time after 9999-12-31", "instance.last_update_time",
			record(func(in *metadatav1.AcquisitionInstance) { in.LastUpdateTime = afterMax })},
		{"record last_update_time not a valid timestamp", "instance.last_update_time",
			record(func(in *metadatav1.AcquisitionInstance) { in.LastUpdateTime = &timestamppb.Timestamp{Nanos: -1} })},
		{"list without within", "within", list(&metadatav1.ListActiveAcquisitionInstancesRequest{})},
		{"list negative within", "within", list(&metadatav1.ListActiveAcquisitionInstancesRequest{Within: durationpb.New(-time.Minute)})},
		{"list zero within", "within", list(&metadatav1.ListActiveAcquisitionInstancesRequest{Within: durationpb.New(0)})},
		{"list within not a valid duration", "within",
			list(&metadatav1.ListActiveAcquisitionInstancesRequest{Within: &durationpb.Duration{Seconds: 60, Nanos: -1}})},
		{"list page_size -1", "page_size", list(&metadatav1.ListActiveAcquisitionInstancesRequest{Within: durationpb.New(time.Hour), PageSize: -1})},
		{"list page_token malformed", "page_token",
			list(&metadatav1.ListActiveAcquisitionInstancesRequest{Within: durationpb.New(time.Hour), PageToken: "?"})},
		{"list page_token of another window", "page_token", listWithTokenOf(func(t *testing.T, h *harness) string {
			resp, err := h.acquisition.ListActiveAcquisitionInstances(t.Context(), &metadatav1.ListActiveAcquisitionInstancesRequest{
				Within: durationpb.New(2 * time.Hour), PageSize: 1})
			requireOK(t, err, "list first page")
			return resp.GetNextPageToken()
		})},
		{"list page_token of the device listing", "page_token", listWithTokenOf(func(t *testing.T, h *harness) string {
			resp, err := h.devices.ListDeviceStates(t.Context(), &metadatav1.ListDeviceStatesRequest{PageSize: 1})
			requireOK(t, err, "list device states")
			return resp.GetNextPageToken()
		})},
	}
	for name, id := range invalidCameraIDs() {
		cases = append(cases,
			badCall{"record instance_id " + name, "instance.instance_id", record(func(in *metadatav1.AcquisitionInstance) { in.InstanceId = id })},
			badCall{"record device_id " + name, "instance.device_id", record(func(in *metadatav1.AcquisitionInstance) { in.DeviceId = id })},
		)
	}
	forEachServer(t, func(t *testing.T, h *harness) {
		h.clock.set(now)
		mustRecord(t, h, run("run-1", running, now.Add(-time.Minute)))
		mustRecord(t, h, run("run-2", running, now.Add(-time.Minute)))
		for _, id := range []string{"cam-1", "cam-2"} {
			mustUpdateDevice(t, h, &metadatav1.UpdateDeviceStateRequest{DeviceState: fullState(id), AllowMissing: true})
		}
		requireRefusedUnchanged(t, h, cases)
	})
}
