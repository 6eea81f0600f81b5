package retentiontest

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/retention"
)

// offsetClock is real time moved on by a test, shared by the store (entity
// timestamps, the backend's clock) and the engine.
type offsetClock struct{ offset atomic.Int64 }

func (c *offsetClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

func (c *offsetClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// testSlowPrimaryWriteKeepsItsIndexRow: without a transaction (the Azure
// path, here Pebble with its Transactor hidden) a create writes its index
// row, then its primary row. A create whose primary write is held back for
// a whole purge (as Azure's retries and backoffs can) still has its index
// row when the primary row lands, and both go in the next purge once the
// create's bound has passed.
func testSlowPrimaryWriteKeepsItsIndexRow(t *testing.T, ts *suite) {
	clock := &offsetClock{}
	opts := quickOptions()
	opts.Now = clock.Now
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem(), Logger: opts.Logger, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })

	late := images.Image{CameraID: "cam-late", CapturedAt: base.Add(10 * time.Second)}
	lateKey := store.Key{PartitionKey: late.CameraID, RowKey: store.InvertedTicksRowKey(late.CapturedAt)}
	reached, release := make(chan struct{}), make(chan struct{})
	// A create bound far beyond the held-back create's wait, however slow
	// the machine; the test moves the store's clock past it instead of waiting.
	f := &Fixture{Base: db, Opts: opts, CreateTimeout: time.Minute, Harness: ts.h}
	hooked := &HookedBackend{Backend: db, Plain: true, Before: func(table, op string, keys []store.Key) error {
		if table == images.Single.DefaultTable() && op == "insert" && keys[0] == lateKey {
			close(reached)
			<-release // a retrying backend, well within the create's bound
		}
		return nil
	}}
	f.OpenEngine(t, hooked)
	lag := f.Repo(images.Single).IndexLag()
	if lag != time.Minute+testLandingMargin {
		t.Fatalf("IndexLag %s without a transaction, want CreateTimeout + LandingMargin", lag)
	}
	f.Seed(t, 2)
	clock.advance(lag) // the seeded rows have settled
	f.Run(t)

	created := make(chan error, 1)
	go func() {
		_, err := f.Repo(images.Single).Create(t.Context(), late)
		created <- err
	}()
	<-reached
	first := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
	close(release)
	if err := <-created; err != nil {
		t.Fatalf("the held-back create: %v", err)
	}
	if first.State != retention.Succeeded {
		t.Fatalf("first purge: %s (%s)", first.State, first.Error)
	}
	wantCounts(t, "first purge", first.Totals(), retention.Counts{DevicesTotal: 3, DevicesDone: 3,
		MetadataRows: 2 * expiredPerCamera, IndexRows: 2 * expiredPerCamera})
	primary, index := f.Repo(images.Single).Tables()
	lateIndex := store.Key{PartitionKey: store.MinutePartitionKey(late.CapturedAt), RowKey: images.IndexRowKey(lateKey.RowKey, late.CameraID)}
	if _, err := primary.Get(t.Context(), lateKey.PartitionKey, lateKey.RowKey); err != nil {
		t.Fatalf("the late image's primary row: %v", err)
	}
	if _, err := index.Get(t.Context(), lateIndex.PartitionKey, lateIndex.RowKey); err != nil {
		t.Fatalf("the late image's index row after a purge ran during its create: %v; its primary row would never expire", err)
	}

	clock.advance(lag)
	second := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff})
	if second.State != retention.Succeeded {
		t.Fatalf("second purge: %s (%s)", second.State, second.Error)
	}
	wantCounts(t, "second purge", second.Totals(), retention.Counts{DevicesTotal: 1, DevicesDone: 1, MetadataRows: 1, IndexRows: 1})
	if _, err := primary.Get(t.Context(), lateKey.PartitionKey, lateKey.RowKey); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the late image's primary row after the next purge: %v, want it expired", err)
	}
	if _, err := index.Get(t.Context(), lateIndex.PartitionKey, lateIndex.RowKey); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the late image's index row after the next purge: %v, want it expired", err)
	}
}
