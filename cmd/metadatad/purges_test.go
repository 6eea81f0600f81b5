package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/drivers"
	"github.com/metadatad/metadatad/store/retention/embedded"
	"github.com/metadatad/metadatad/store/retention/queue"
)

// TestPurgesEndBeforeTheStoreCloses stops the daemon's purges while a purge
// works, its lease renewal is in the store (renewals are made slow) and the
// schedule starts purges every millisecond: once stop returns, no call may
// be in the store nor come later. The embedded engine panics on use after
// close; this catches the call that would.
func TestPurgesEndBeforeTheStoreCloses(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprint("round ", round), func(t *testing.T) {
			db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem(), Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			backend := &watchedBackend{Backend: db}
			var repos []*images.Repository
			for _, kind := range images.Kinds {
				repo, err := images.Open(t.Context(), backend, images.Options{Kind: kind})
				if err != nil {
					t.Fatal(err)
				}
				repos = append(repos, repo)
			}
			now := time.Now().UTC()
			for i := range 100 {
				img := images.Image{CameraID: fmt.Sprintf("cam-%d", i%20), CapturedAt: now.AddDate(0, 0, -10).Add(time.Duration(i) * time.Minute)}
				if _, err := repos[0].Create(t.Context(), img); err != nil {
					t.Fatal(err)
				}
			}
			engine, err := retention.Open(t.Context(), retention.Options{Backend: backend, Repositories: repos, Driver: drivers.For(backend, queue.Options{Workers: 2}),
				Logger: slog.New(slog.DiscardHandler), LeaseDuration: 15 * time.Millisecond, PollInterval: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			backend.slow.Store(true)
			p := startPurges(engine, retention.Schedule{Retention: 24 * time.Hour, Interval: time.Millisecond}, embedded.Budget{}, nil, nil, slog.New(slog.DiscardHandler))
			time.Sleep(time.Duration(20*round) * time.Millisecond)
			for backend.renewing.Load() == 0 {
				time.Sleep(time.Millisecond)
			}
			if !p.stop(context.Background()) {
				t.Fatal("purges did not stop")
			}
			if n := backend.inStore.Load(); n != 0 {
				t.Errorf("%d calls still in the store after the purges stopped", n)
			}
			backend.closed.Store(true)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
			if n := backend.afterClose.Load(); n != 0 {
				t.Errorf("%d calls reached the store after it closed", n)
			}
			if backend.calls.Load() == 0 {
				t.Fatal("the purges made no call: the test tested nothing")
			}
		})
	}
}

// watchedBackend counts the calls in its tables: those in progress, and
// those that come after closed is set. While slow is set, a job update that
// only extends the lease takes 50 ms more, as on a loaded disk or a distant
// service.
type watchedBackend struct {
	store.Backend
	slow, closed                         atomic.Bool
	calls, inStore, afterClose, renewing atomic.Int64
}

func (b *watchedBackend) Table(ctx context.Context, name string) (store.Table, error) {
	t, err := b.Backend.Table(ctx, name)
	if err != nil {
		return nil, err
	}
	return &watchedTable{Table: t, b: b}, nil
}

// enter records a call, taking delay more while slow is set; the returned
// function records its end.
func (b *watchedBackend) enter(delay time.Duration) func() {
	b.calls.Add(1)
	if b.closed.Load() {
		b.afterClose.Add(1)
	}
	b.inStore.Add(1)
	if b.slow.Load() {
		time.Sleep(delay)
	}
	return func() { b.inStore.Add(-1) }
}

type watchedTable struct {
	store.Table
	b *watchedBackend
}

func (t *watchedTable) Insert(ctx context.Context, e store.Entity) (store.Entity, error) {
	defer t.b.enter(0)()
	return t.Table.Insert(ctx, e)
}

func (t *watchedTable) Upsert(ctx context.Context, e store.Entity, mode store.WriteMode) (store.Entity, error) {
	defer t.b.enter(0)()
	return t.Table.Upsert(ctx, e, mode)
}

func (t *watchedTable) Update(ctx context.Context, e store.Entity, mode store.WriteMode, ifMatch string) (store.Entity, error) {
	var delay time.Duration
	if t.renews(ctx, e) {
		t.b.renewing.Add(1)
		defer t.b.renewing.Add(-1)
		delay = 50 * time.Millisecond
	}
	defer t.b.enter(delay)()
	return t.Table.Update(ctx, e, mode, ifMatch)
}

// renews tells a job update that changes nothing but the lease.
func (t *watchedTable) renews(ctx context.Context, e store.Entity) bool {
	if t.Name() != retention.DefaultJobsTable {
		return false
	}
	stored, err := t.Table.Get(ctx, e.PartitionKey, e.RowKey)
	if err != nil {
		return false
	}
	var before, after map[string]any
	beforeDoc, _ := stored.Properties["Doc"].(string)
	afterDoc, _ := e.Properties["Doc"].(string)
	if json.Unmarshal([]byte(beforeDoc), &before) != nil || json.Unmarshal([]byte(afterDoc), &after) != nil {
		return false
	}
	if before["leaseUntil"] == after["leaseUntil"] {
		return false
	}
	delete(before, "leaseUntil")
	delete(after, "leaseUntil")
	return reflect.DeepEqual(before, after)
}

func (t *watchedTable) Get(ctx context.Context, pk, rk string) (store.Entity, error) {
	defer t.b.enter(0)()
	return t.Table.Get(ctx, pk, rk)
}

func (t *watchedTable) Delete(ctx context.Context, pk, rk, ifMatch string) error {
	defer t.b.enter(0)()
	return t.Table.Delete(ctx, pk, rk, ifMatch)
}

func (t *watchedTable) Query(ctx context.Context, q store.Query) (store.Page, error) {
	defer t.b.enter(0)()
	return t.Table.Query(ctx, q)
}

func (t *watchedTable) Scan(ctx context.Context, s store.Scan) (store.Page, error) {
	defer t.b.enter(0)()
	return t.Table.Scan(ctx, s)
}

func (t *watchedTable) Batch(ctx context.Context, ops []store.Op) error {
	defer t.b.enter(0)()
	return t.Table.Batch(ctx, ops)
}
