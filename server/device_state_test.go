package server_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store"
)

// mask is an update mask of paths; no paths is no mask.
func mask(paths ...string) *fieldmaskpb.FieldMask {
	if len(paths) == 0 {
		return nil
	}
	return &fieldmaskpb.FieldMask{Paths: paths}
}

func mustUpdateDevice(t *testing.T, h *harness, req *metadatav1.UpdateDeviceStateRequest) *metadatav1.DeviceState {
	t.Helper()
	resp, err := h.devices.UpdateDeviceState(t.Context(), req)
	requireOK(t, err, "update device state")
	return resp.GetDeviceState()
}

func getDevice(t *testing.T, h *harness, id string) *metadatav1.DeviceState {
	t.Helper()
	resp, err := h.devices.GetDeviceState(t.Context(), &metadatav1.GetDeviceStateRequest{DeviceId: id})
	requireOK(t, err, "get device state "+id)
	return resp.GetDeviceState()
}

// requireDeviceState fails unless got equals want but for the etag, which
// must be set.
func requireDeviceState(t *testing.T, got, want *metadatav1.DeviceState) {
	t.Helper()
	if got.GetEtag() == "" {
		t.Errorf("device state %v has no etag", got)
	}
	got = proto.Clone(got).(*metadatav1.DeviceState)
	got.Etag = ""
	if !proto.Equal(got, want) {
		t.Fatalf("device state %v\nwant         %v", got, want)
	}
}

// fullState is a device state with every updatable field set.
func fullState(id string) *metadatav1.DeviceState {
	return &metadatav1.DeviceState{
		DeviceId: id, CurrentConfig: "config-7",
		SingleModeStatus: "Active", SingleModeRate: 60,
		PanoModeStatus: "Active", PanoModeRate: 300,
		LeasedModeStatus: "Leased", LeasedModeRate: 10, LeasedModeEndTime: timestamppb.New(minute(90)),
		TurboModeStatus: "Turbo", TurboModeRate: 5, TurboModeEndTime: timestamppb.New(minute(30)),
	}
}

// TestUpdateDeviceStateMerges runs a sequence of updates of one device and
// checks after each that the masked fields changed, every other field kept
// its value and update_time is the server's clock.
func TestUpdateDeviceStateMerges(t *testing.T) {
	steps := []struct {
		name  string
		state *metadatav1.DeviceState
		paths []string
		// want is the whole state after the step, update_time and etag aside.
		want *metadatav1.DeviceState
	}{
		{
			name:  "create with a mask",
			state: &metadatav1.DeviceState{DeviceId: "cam-1", CurrentConfig: "config-1", SingleModeStatus: "Active", SingleModeRate: 60, PanoModeStatus: "ignored"},
			paths: []string{"current_config", "single_mode_status", "single_mode_rate"},
			want:  &metadatav1.DeviceState{DeviceId: "cam-1", CurrentConfig: "config-1", SingleModeStatus: "Active", SingleModeRate: 60},
		},
		{
			name:  "fields outside the mask are untouched",
			state: &metadatav1.DeviceState{DeviceId: "cam-1", CurrentConfig: "changed", SingleModeStatus: "changed", PanoModeStatus: "Active", PanoModeRate: 300},
			paths: []string{"pano_mode_status", "pano_mode_rate"},
			want: &metadatav1.DeviceState{DeviceId: "cam-1", CurrentConfig: "config-1", SingleModeStatus: "Active", SingleModeRate: 60,
				PanoModeStatus: "Active", PanoModeRate: 300},
		},
		{
			name:  "a masked field left unset is cleared",
			state: &metadatav1.DeviceState{DeviceId: "cam-1", SingleModeStatus: "Paused"},
			paths: []string{"single_mode_status", "single_mode_rate"},
			want: &metadatav1.DeviceState{DeviceId: "cam-1", CurrentConfig: "config-1", SingleModeStatus: "Paused",
				PanoModeStatus: "Active", PanoModeRate: 300},
		},
		{
			name: "end times",
			state: &metadatav1.DeviceState{DeviceId: "cam-1", LeasedModeStatus: "Leased", LeasedModeEndTime: timestamppb.New(minute(90).Add(123)),
				TurboModeEndTime: timestamppb.New(minute(30))},
			paths: []string{"leased_mode_status", "leased_mode_end_time", "turbo_mode_end_time"},
			want: &metadatav1.DeviceState{DeviceId: "cam-1", CurrentConfig: "config-1", SingleModeStatus: "Paused",
				PanoModeStatus: "Active", PanoModeRate: 300, LeasedModeStatus: "Leased", LeasedModeEndTime: timestamppb.New(minute(90).Add(100)),
				TurboModeEndTime: timestamppb.New(minute(30))},
		},
		{
			name:  "an unset end time in the mask clears it",
			state: &metadatav1.DeviceState{DeviceId: "cam-1"},
			paths: []string{"leased_mode_end_time"},
			want: &metadatav1.DeviceState{DeviceId: "cam-1", CurrentConfig: "config-1", SingleModeStatus: "Paused",
				PanoModeStatus: "Active", PanoModeRate: 300, LeasedModeStatus: "Leased", TurboModeEndTime: timestamppb.New(minute(30))},
		},
		{
			name:  "no mask changes the fields set in the request",
			state: &metadatav1.DeviceState{DeviceId: "cam-1", TurboModeStatus: "Turbo", TurboModeRate: 5, UpdateTime: timestamppb.New(minute(-60))},
			want: &metadatav1.DeviceState{DeviceId: "cam-1", CurrentConfig: "config-1", SingleModeStatus: "Paused",
				PanoModeStatus: "Active", PanoModeRate: 300, LeasedModeStatus: "Leased", TurboModeStatus: "Turbo", TurboModeRate: 5,
				TurboModeEndTime: timestamppb.New(minute(30))},
		},
		{
			name:  "a wildcard mask replaces every field",
			state: &metadatav1.DeviceState{DeviceId: "cam-1", CurrentConfig: "config-2", LeasedModeRate: 1},
			paths: []string{"*"},
			want:  &metadatav1.DeviceState{DeviceId: "cam-1", CurrentConfig: "config-2", LeasedModeRate: 1},
		},
		{
			name:  "a wildcard mask sets every field",
			state: fullState("cam-1"),
			paths: []string{"*"},
			want:  fullState("cam-1"),
		},
		{
			name:  "an empty update only moves update_time",
			state: &metadatav1.DeviceState{DeviceId: "cam-1"},
			want:  fullState("cam-1"),
		},
	}
	forEachServer(t, func(t *testing.T, h *harness) {
		var etag string
		for i, step := range steps {
			t.Run(step.name, func(t *testing.T) {
				now := minute(i).Add(time.Duration(i) * 1234)
				h.clock.set(now)
				got := mustUpdateDevice(t, h, &metadatav1.UpdateDeviceStateRequest{
					DeviceState: step.state, UpdateMask: mask(step.paths...), AllowMissing: true})
				want := proto.Clone(step.want).(*metadatav1.DeviceState)
				want.UpdateTime = timestamppb.New(store.TruncateToTicks(now))
				requireDeviceState(t, got, want)
				if got.GetEtag() == etag {
					t.Errorf("etag %s did not change", etag)
				}
				etag = got.GetEtag()
				if read := getDevice(t, h, "cam-1"); !proto.Equal(read, got) {
					t.Fatalf("read back %v\nupdate returned %v", read, got)
				}
			})
		}
		t.Run("one row, keyed by device", func(t *testing.T) {
			rows := h.rows(t, "DurableEntityData")
			if len(rows) != 1 || rows[0].PartitionKey != "cam-1" || rows[0].RowKey != "state" {
				t.Fatalf("rows %s, want [cam-1/state]", rowKeys(rows))
			}
			p := rows[0].Properties
			if p["DeviceId"] != "cam-1" || p["SingleModeStatus"] != "Active" || p["SingleModeRate"] != int32(60) ||
				p["LeasedModeEndDt"] != minute(90) || !store.EqualValues(p["LastModifiedDt"], store.TruncateToTicks(h.clock.Now())) {
				t.Errorf("row properties %v", p)
			}
		})
	})
}

// TestUpdateDeviceStateKeepsUnknownProperties: properties the .NET system
// wrote that the service does not know survive an update.
func TestUpdateDeviceStateKeepsUnknownProperties(t *testing.T) {
	forEachServer(t, func(t *testing.T, h *harness) {
		table, err := h.backend.Table(t.Context(), "DurableEntityData")
		requireOK(t, err, "open table")
		_, err = table.Insert(t.Context(), store.Entity{PartitionKey: "cam-1", RowKey: "state", Properties: store.Properties{
			"DeviceId": "cam-1", "SingleModeStatus": "Active", "LegacyFlag": true}})
		requireOK(t, err, "insert row as the .NET system")
		got := mustUpdateDevice(t, h, &metadatav1.UpdateDeviceStateRequest{
			DeviceState: &metadatav1.DeviceState{DeviceId: "cam-1", PanoModeRate: 5}, UpdateMask: mask("pano_mode_rate")})
		requireDeviceState(t, got, &metadatav1.DeviceState{DeviceId: "cam-1", SingleModeStatus: "Active", PanoModeRate: 5,
			UpdateTime: timestamppb.New(h.clock.Now())})
		if row, err := table.Get(t.Context(), "cam-1", "state"); err != nil || row.Properties["LegacyFlag"] != true {
			t.Fatalf("row after update: %v, %v; want LegacyFlag kept", row.Properties, err)
		}
	})
}

// TestUpdateDeviceStateAllowMissing: without allow_missing a device without
// state is NOT_FOUND and nothing is written; with it the state is created.
func TestUpdateDeviceStateAllowMissing(t *testing.T) {
	forEachServer(t, func(t *testing.T, h *harness) {
		before := h.snapshot(t)
		for _, tc := range []struct {
			name string
			req  *metadatav1.UpdateDeviceStateRequest
			want codes.Code
		}{
			{"missing device", &metadatav1.UpdateDeviceStateRequest{DeviceState: fullState("cam-1")}, codes.NotFound},
			{"missing device with a mask", &metadatav1.UpdateDeviceStateRequest{DeviceState: fullState("cam-1"), UpdateMask: mask("*")}, codes.NotFound},
			{"missing device with an etag and allow_missing", &metadatav1.UpdateDeviceStateRequest{
				DeviceState: &metadatav1.DeviceState{DeviceId: "cam-1", Etag: `W/"1"`}, AllowMissing: true}, codes.Aborted},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := h.devices.UpdateDeviceState(t.Context(), tc.req)
				requireCode(t, err, tc.want)
				h.requireUnchanged(t, before)
			})
		}
		t.Run("allow_missing creates", func(t *testing.T) {
			got := mustUpdateDevice(t, h, &metadatav1.UpdateDeviceStateRequest{DeviceState: fullState("cam-1"), AllowMissing: true})
			want := fullState("cam-1")
			want.UpdateTime = timestamppb.New(h.clock.Now())
			requireDeviceState(t, got, want)
		})
		t.Run("an existing device needs no allow_missing", func(t *testing.T) {
			got := mustUpdateDevice(t, h, &metadatav1.UpdateDeviceStateRequest{
				DeviceState: &metadatav1.DeviceState{DeviceId: "cam-1", CurrentConfig: "config-8"}})
			if got.GetCurrentConfig() != "config-8" || got.GetSingleModeRate() != 60 {
				t.Fatalf("state %v", got)
			}
		})
	})
}

// TestDeviceStateEtag checks optimistic concurrency: a stale etag is
// ABORTED and changes nothing, the current one succeeds.
func TestDeviceStateEtag(t *testing.T) {
	forEachServer(t, func(t *testing.T, h *harness) {
		first := mustUpdateDevice(t, h, &metadatav1.UpdateDeviceStateRequest{DeviceState: fullState("cam-1"), AllowMissing: true})
		second := mustUpdateDevice(t, h, &metadatav1.UpdateDeviceStateRequest{
			DeviceState: &metadatav1.DeviceState{DeviceId: "cam-1", SingleModeStatus: "Paused", Etag: first.GetEtag()}})
		if second.GetEtag() == first.GetEtag() || second.GetSingleModeStatus() != "Paused" {
			t.Fatalf("update with the current etag: %v", second)
		}
		before := h.snapshot(t)
		for _, tc := range []struct {
			name string
			call func() error
		}{
			{"update with a stale etag", func() error {
				_, err := h.devices.UpdateDeviceState(t.Context(), &metadatav1.UpdateDeviceStateRequest{
					DeviceState: &metadatav1.DeviceState{DeviceId: "cam-1", SingleModeStatus: "Lost", Etag: first.GetEtag()}})
				return err
			}},
			{"update with a stale etag and allow_missing", func() error {
				_, err := h.devices.UpdateDeviceState(t.Context(), &metadatav1.UpdateDeviceStateRequest{
					DeviceState: &metadatav1.DeviceState{DeviceId: "cam-1", SingleModeStatus: "Lost", Etag: first.GetEtag()}, AllowMissing: true})
				return err
			}},
			{"update with an etag never issued", func() error {
				_, err := h.devices.UpdateDeviceState(t.Context(), &metadatav1.UpdateDeviceStateRequest{
					DeviceState: &metadatav1.DeviceState{DeviceId: "cam-1", SingleModeStatus: "Lost", Etag: `W/"bogus"`}})
				return err
			}},
			{"delete with a stale etag", func() error {
				_, err := h.devices.DeleteDeviceState(t.Context(), &metadatav1.DeleteDeviceStateRequest{DeviceId: "cam-1", Etag: first.GetEtag()})
				return err
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				requireCode(t, tc.call(), codes.Aborted)
				h.requireUnchanged(t, before)
			})
		}
		t.Run("delete with the current etag", func(t *testing.T) {
			_, err := h.devices.DeleteDeviceState(t.Context(), &metadatav1.DeleteDeviceStateRequest{DeviceId: "cam-1", Etag: second.GetEtag()})
			requireOK(t, err, "delete")
			_, err = h.devices.GetDeviceState(t.Context(), &metadatav1.GetDeviceStateRequest{DeviceId: "cam-1"})
			requireCode(t, err, codes.NotFound)
			_, err = h.devices.DeleteDeviceState(t.Context(), &metadatav1.DeleteDeviceStateRequest{DeviceId: "cam-1"})
			requireCode(t, err, codes.NotFound)
		})
		t.Run("delete without an etag", func(t *testing.T) {
			mustUpdateDevice(t, h, &metadatav1.UpdateDeviceStateRequest{DeviceState: fullState("cam-2"), AllowMissing: true})
			_, err := h.devices.DeleteDeviceState(t.Context(), &metadatav1.DeleteDeviceStateRequest{DeviceId: "cam-2"})
			requireOK(t, err, "delete")
			if rows := h.rows(t, "DurableEntityData"); len(rows) != 0 {
				t.Fatalf("rows after deletes: %s", rowKeys(rows))
			}
		})
	})
}

// TestConcurrentDeviceUpdatesMerge updates every field of one device at
// once, one field per call and no etag: no update loses another's field.
func TestConcurrentDeviceUpdatesMerge(t *testing.T) {
	forEachServer(t, func(t *testing.T, h *harness) {
		full := fullState("cam-1")
		paths := []string{"current_config", "single_mode_status", "single_mode_rate", "pano_mode_status", "pano_mode_rate",
			"leased_mode_status", "leased_mode_rate", "leased_mode_end_time", "turbo_mode_status", "turbo_mode_rate", "turbo_mode_end_time"}
		var wg sync.WaitGroup
		errs := make([]error, len(paths))
		for i, path := range paths {
			wg.Go(func() {
				_, errs[i] = h.devices.UpdateDeviceState(t.Context(), &metadatav1.UpdateDeviceStateRequest{
					DeviceState: full, UpdateMask: mask(path), AllowMissing: true})
			})
		}
		wg.Wait()
		for i, err := range errs {
			requireOK(t, err, "update "+paths[i])
		}
		want := fullState("cam-1")
		want.UpdateTime = timestamppb.New(h.clock.Now())
		requireDeviceState(t, getDevice(t, h, "cam-1"), want)
	})
}

// TestListDeviceStates pages through every device in device id order.
func TestListDeviceStates(t *testing.T) {
	cases := []struct {
		name      string
		pageSize  int32
		wantPages int
	}{
		{name: "pages of 1", pageSize: 1, wantPages: 25},
		{name: "pages of 10", pageSize: 10, wantPages: 3},
		{name: "one page exactly", pageSize: 25, wantPages: 1},
		{name: "default page size", wantPages: 1},
	}
	forEachServer(t, func(t *testing.T, h *harness) {
		var want []*metadatav1.DeviceState
		for i := range 25 {
			// Created in another order than listed.
			id := fmt.Sprintf("cam-%02d", (i*7)%25)
			state := &metadatav1.DeviceState{DeviceId: id, CurrentConfig: "config-" + id}
			mustUpdateDevice(t, h, &metadatav1.UpdateDeviceStateRequest{DeviceState: state, AllowMissing: true})
		}
		for i := range 25 {
			id := fmt.Sprintf("cam-%02d", i)
			want = append(want, &metadatav1.DeviceState{DeviceId: id, CurrentConfig: "config-" + id, UpdateTime: timestamppb.New(h.clock.Now())})
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				req := &metadatav1.ListDeviceStatesRequest{PageSize: tc.pageSize}
				var got []*metadatav1.DeviceState
				pages := 0
				for ; pages < maxPages; pages++ {
					resp, err := h.devices.ListDeviceStates(t.Context(), req)
					requireOK(t, err, fmt.Sprintf("page %d", pages))
					for _, s := range resp.GetDeviceStates() {
						if s.GetEtag() == "" {
							t.Errorf("listed state %v has no etag", s)
						}
						s.Etag = ""
						got = append(got, s)
					}
					if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
						break
					}
				}
				requireMessages(t, got, want)
				if pages+1 != tc.wantPages {
					t.Errorf("%d pages, want %d", pages+1, tc.wantPages)
				}
			})
		}
	})
}

// TestDeviceStateBadInput checks that every bad request gets
// INVALID_ARGUMENT naming the field, and writes nothing.
func TestDeviceStateBadInput(t *testing.T) {
	update := func(req *metadatav1.UpdateDeviceStateRequest) func(t *testing.T, h *harness) error {
		return func(t *testing.T, h *harness) error {
			_, err := h.devices.UpdateDeviceState(t.Context(), req)
			return err
		}
	}
	withMask := func(paths ...string) func(t *testing.T, h *harness) error {
		return update(&metadatav1.UpdateDeviceStateRequest{DeviceState: fullState("cam-1"), UpdateMask: mask(paths...), AllowMissing: true})
	}
	changed := func(change func(s *metadatav1.DeviceState)) func(t *testing.T, h *harness) error {
		s := fullState("cam-1")
		change(s)
		return update(&metadatav1.UpdateDeviceStateRequest{DeviceState: s, UpdateMask: mask("*"), AllowMissing: true})
	}
	list := func(req *metadatav1.ListDeviceStatesRequest) func(t *testing.T, h *harness) error {
		return func(t *testing.T, h *harness) error {
			_, err := h.devices.ListDeviceStates(t.Context(), req)
			return err
		}
	}
	cases := []badCall{
		{"update without device_state", "device_state", update(&metadatav1.UpdateDeviceStateRequest{UpdateMask: mask("*"), AllowMissing: true})},
		{"update unknown mask path", "update_mask.paths[1]", withMask("current_config", "no_such_field")},
		{"update mask path in camel case", "update_mask.paths[0]", withMask("currentConfig")},
		{"update mask path device_id", "update_mask.paths[0]", withMask("device_id")},
		{"update mask path etag", "update_mask.paths[1]", withMask("current_config", "etag")},
		{"update mask path update_time", "update_mask.paths[0]", withMask("update_time")},
		{"update wildcard among other paths", "update_mask.paths[1]", withMask("current_config", "*")},
		{"update negative single_mode_rate", "device_state.single_mode_rate", changed(func(s *metadatav1.DeviceState) { s.SingleModeRate = -1 })},
		{"update negative turbo_mode_rate", "device_state.turbo_mode_rate", changed(func(s *metadatav1.DeviceState) { s.TurboModeRate = -1 })},
		{"update leased_mode_end_time after 9999-12-31", "device_state.leased_mode_end_time", changed(func(s *metadatav1.DeviceState) {
			s.LeasedModeEndTime = timestamppb.New(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
		})},
		{"update turbo_mode_end_time not a valid timestamp", "device_state.turbo_mode_end_time", changed(func(s *metadatav1.DeviceState) {
			s.TurboModeEndTime = &timestamppb.Timestamp{Nanos: -1}
		})},
		{"update current_config over 64 KiB as UTF-16", "device_state.current_config", changed(func(s *metadatav1.DeviceState) {
			s.CurrentConfig = strings.Repeat("c", 32769)
		})},
		{"list page_size -1", "page_size", list(&metadatav1.ListDeviceStatesRequest{PageSize: -1})},
		{"list page_token malformed", "page_token", list(&metadatav1.ListDeviceStatesRequest{PageToken: "not a token"})},
		{"list page_token of the single image listing", "page_token", func(t *testing.T, h *harness) error {
			token := firstPageToken(t, singleClient{h.single}, listQuery{cameraID: "cam-1"})
			_, err := h.devices.ListDeviceStates(t.Context(), &metadatav1.ListDeviceStatesRequest{PageToken: token})
			return err
		}},
	}
	for name, id := range invalidCameraIDs() {
		cases = append(cases,
			badCall{"update device_id " + name, "device_state.device_id", changed(func(s *metadatav1.DeviceState) { s.DeviceId = id })},
			badCall{"get device_id " + name, "device_id", func(t *testing.T, h *harness) error {
				_, err := h.devices.GetDeviceState(t.Context(), &metadatav1.GetDeviceStateRequest{DeviceId: id})
				return err
			}},
			badCall{"delete device_id " + name, "device_id", func(t *testing.T, h *harness) error {
				_, err := h.devices.DeleteDeviceState(t.Context(), &metadatav1.DeleteDeviceStateRequest{DeviceId: id})
				return err
			}},
		)
	}
	forEachServer(t, func(t *testing.T, h *harness) {
		mustUpdateDevice(t, h, &metadatav1.UpdateDeviceStateRequest{DeviceState: fullState("cam-2"), AllowMissing: true})
		mustUpdateDevice(t, h, &metadatav1.UpdateDeviceStateRequest{DeviceState: fullState("cam-3"), AllowMissing: true})
		mustCreate(t, singleClient{h.single}, sample("cam-1", minute(1)))
		mustCreate(t, singleClient{h.single}, sample("cam-1", minute(2)))
		requireRefusedUnchanged(t, h, cases)
	})
}
