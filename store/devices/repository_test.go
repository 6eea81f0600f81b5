package devices_test

import (
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/devices"
	"github.com/metadatad/metadatad/store/pebble"
)

func TestUpdate(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 123, time.UTC)
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	repo, err := devices.Open(t.Context(), db, devices.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	table, err := db.Table(t.Context(), devices.DefaultTable)
	if err != nil {
		t.Fatal(err)
	}
	full := devices.State{DeviceID: "cam-1", CurrentConfig: "c", SingleModeRate: 3, TurboModeEnd: now}
	cases := []struct {
		name    string
		update  devices.Update
		wantErr error
		// props are the properties of the row after the update, if it succeeds.
		props store.Properties
	}{
		{name: "missing without AllowMissing", update: devices.Update{State: full, Fields: devices.Fields}, wantErr: store.ErrNotFound},
		{name: "unknown field", update: devices.Update{State: full, Fields: []devices.Field{"DeviceId"}, AllowMissing: true},
			wantErr: store.ErrInvalidEntity},
		{name: "create", update: devices.Update{State: full, Fields: devices.Fields, AllowMissing: true},
			props: store.Properties{"DeviceId": "cam-1", "CurrentConfig": "c", "SingleModeRate": int32(3),
				"TurboModeEndDt": now.Add(-23), "LastModifiedDt": now.Add(-23)}},
		{name: "zero values are absent properties", update: devices.Update{State: devices.State{DeviceID: "cam-1"},
			Fields: []devices.Field{devices.SingleModeRate, devices.TurboModeEnd}},
			props: store.Properties{"DeviceId": "cam-1", "CurrentConfig": "c", "LastModifiedDt": now.Add(-23)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := repo.Update(t.Context(), tc.update)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("update: %v, want %v", err, tc.wantErr)
			}
			if tc.props == nil {
				return
			}
			row, err := table.Get(t.Context(), "cam-1", devices.StateRowKey)
			if err != nil || !store.EqualProperties(row.Properties, tc.props) {
				t.Fatalf("row %v, %v; want %v", row.Properties, err, tc.props)
			}
		})
	}
}
