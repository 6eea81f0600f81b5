package acquisition_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/acquisition"
	"github.com/metadatad/metadatad/store/pebble"
)

var now = time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)

func openDB(t *testing.T) *pebble.DB {
	t.Helper()
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// faults is a backend whose instance table Updates and active table
// Deletes fail while their switches are on, as a crash between a record's
// writes would leave things; it hides the Transactor, as Azure has none.
type faults struct {
	store.Backend
	failUpdates, failDeletes atomic.Bool
}

func (f *faults) Table(ctx context.Context, name string) (store.Table, error) {
	t, err := f.Backend.Table(ctx, name)
	return faultyTable{Table: t, f: f}, err
}

type faultyTable struct {
	store.Table
	f *faults
}

var errInjected = errors.New("injected: connection reset")

func (t faultyTable) Update(ctx context.Context, e store.Entity, mode store.WriteMode, ifMatch string) (store.Entity, error) {
	if t.f.failUpdates.Load() {
		return store.Entity{}, errInjected
	}
	return t.Table.Update(ctx, e, mode, ifMatch)
}

func (t faultyTable) Delete(ctx context.Context, partitionKey, rowKey, ifMatch string) error {
	if t.f.failDeletes.Load() {
		return errInjected
	}
	return t.Table.Delete(ctx, partitionKey, rowKey, ifMatch)
}

func open(t *testing.T, backend store.Backend) *acquisition.Repository {
	t.Helper()
	repo, err := acquisition.Open(t.Context(), backend, acquisition.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

func listActive(t *testing.T, repo *acquisition.Repository) []acquisition.Instance {
	t.Helper()
	got, next, err := repo.ListActive(t.Context(), acquisition.ListOptions{Within: time.Hour, Limit: store.MaxPageSize})
	if err != nil || next != nil {
		t.Fatalf("ListActive: next %v, %v", next, err)
	}
	return got
}

func activeRows(t *testing.T, backend store.Backend) []string {
	t.Helper()
	table, err := backend.Table(t.Context(), acquisition.ActiveTable(acquisition.DefaultTable))
	if err != nil {
		t.Fatal(err)
	}
	page, err := table.Scan(t.Context(), store.Scan{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range page.Entities {
		keys = append(keys, e.PartitionKey+"/"+e.RowKey)
	}
	return keys
}

// TestRecordSurvivesFailedWrites fails a record's writes one at a time and
// checks that listings always show the instance as its instance row has it.
func TestRecordSurvivesFailedWrites(t *testing.T) {
	first := acquisition.Instance{ID: "run-1", DeviceID: "cam-1", Status: acquisition.Running, LastUpdated: now.Add(-5 * time.Minute)}
	moved := first
	moved.LastUpdated = now.Add(-time.Minute)
	ended := first
	ended.Status, ended.LastUpdated = acquisition.Completed, now.Add(-time.Minute)
	cases := []struct {
		name                     string
		next                     acquisition.Instance
		failUpdates, failDeletes bool
		// wantErr is whether the record fails; listed is the instance
		// listings show after it, if any.
		wantErr bool
		listed  *acquisition.Instance
		rows    []string
	}{
		{name: "instance write fails after the new active row", next: moved, failUpdates: true, wantErr: true,
			listed: &first, rows: []string{"202601010055/run-1", "202601010059/run-1"}},
		{name: "removal of the superseded active row fails", next: moved, failDeletes: true,
			listed: &moved, rows: []string{"202601010055/run-1", "202601010059/run-1"}},
		{name: "removal fails when the instance ends", next: ended, failDeletes: true,
			rows: []string{"202601010055/run-1"}},
		{name: "no failure", next: moved, listed: &moved, rows: []string{"202601010059/run-1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			backend := &faults{Backend: openDB(t)}
			var logged bytes.Buffer
			repo, err := acquisition.Open(t.Context(), backend, acquisition.Options{Now: func() time.Time { return now },
				Logger: slog.New(slog.NewTextHandler(&logged, nil))})
			if err != nil {
				t.Fatal(err)
			}
			stored, err := repo.Record(t.Context(), first)
			if err != nil {
				t.Fatal(err)
			}
			first.Created = stored.Created
			backend.failUpdates.Store(tc.failUpdates)
			backend.failDeletes.Store(tc.failDeletes)
			if _, err := repo.Record(t.Context(), tc.next); (err != nil) != tc.wantErr {
				t.Fatalf("record: %v, want error %t", err, tc.wantErr)
			}
			backend.failUpdates.Store(false)
			backend.failDeletes.Store(false)
			// A failure the record survives is not swallowed: the log names it.
			warned := strings.Contains(logged.String(), "superseded active row failed") &&
				strings.Contains(logged.String(), "instance=run-1") && strings.Contains(logged.String(), errInjected.Error())
			if warned != tc.failDeletes {
				t.Errorf("log %q; want a warning naming the instance and the error: %t", logged.String(), tc.failDeletes)
			}
			var want []acquisition.Instance
			if tc.listed != nil {
				in := *tc.listed
				in.Created = first.Created
				want = append(want, in)
			}
			if got := listActive(t, repo); !slices.Equal(got, want) {
				t.Errorf("listed %+v, want %+v", got, want)
			}
			if got := activeRows(t, backend); !slices.Equal(got, tc.rows) {
				t.Errorf("active rows %q, want %q", got, tc.rows)
			}
			if tc.wantErr {
				if _, err := repo.Record(t.Context(), tc.next); err != nil {
					t.Fatalf("retry: %v", err)
				}
				if got := listActive(t, repo); len(got) != 1 || !got[0].LastUpdated.Equal(tc.next.LastUpdated) {
					t.Errorf("after the retry, listed %+v", got)
				}
			}
		})
	}
}

// TestConcurrentRecordsOfOneInstance records one instance from many
// goroutines at once, in statuses and minutes that move its active row:
// whoever wins, the listing agrees with the instance row and the instance,
// when active, has its active row.
func TestConcurrentRecordsOfOneInstance(t *testing.T) {
	for round := range 20 {
		t.Run(fmt.Sprintf("round %d", round), func(t *testing.T) {
			backend := &faults{Backend: openDB(t)}
			repo := open(t, backend)
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Go(func() {
					status := acquisition.Running
					if i%4 == 0 {
						status = acquisition.Completed
					}
					in := acquisition.Instance{ID: "run-1", DeviceID: "cam-1", Status: status, LastUpdated: now.Add(-time.Duration(i%3) * time.Minute)}
					if _, err := repo.Record(t.Context(), in); err != nil {
						t.Errorf("record %d: %v", i, err)
					}
				})
			}
			wg.Wait()
			table, err := backend.Table(t.Context(), acquisition.DefaultTable)
			if err != nil {
				t.Fatal(err)
			}
			row, err := table.Get(t.Context(), "run-1", acquisition.InstanceRowKey)
			if err != nil {
				t.Fatal(err)
			}
			stored, _ := row.Properties[acquisition.PropStatus].(string)
			updated, _ := row.Properties[acquisition.PropLastUpdated].(time.Time)
			got := listActive(t, repo)
			if acquisition.Status(stored).Active() {
				if len(got) != 1 || !got[0].LastUpdated.Equal(updated) {
					t.Fatalf("instance row %s at %s, listed %+v", stored, updated, got)
				}
				if rows := activeRows(t, backend); !slices.Contains(rows, store.MinutePartitionKey(updated)+"/run-1") {
					t.Fatalf("active instance at %s lacks its active row: %q", updated, rows)
				}
			} else if len(got) != 0 {
				t.Fatalf("instance row %s, listed %+v", stored, got)
			}
		})
	}
}
