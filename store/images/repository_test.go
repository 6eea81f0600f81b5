package images_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
)

func openDB(t testing.TB) *pebble.DB {
	t.Helper()
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// plainBackend hides the Transactor of the backend it wraps, as Azure Table
// Storage has none, and lets a test break or watch its tables.
type plainBackend struct {
	store.Backend
	wrap func(store.Table) store.Table
}

func (b plainBackend) Table(ctx context.Context, name string) (store.Table, error) {
	t, err := b.Backend.Table(ctx, name)
	if err != nil || b.wrap == nil {
		return t, err
	}
	return b.wrap(t), nil
}

// failingInserts fails every Insert, as a crash between the two writes would.
type failingInserts struct{ store.Table }

func (f failingInserts) Insert(context.Context, store.Entity) (store.Entity, error) {
	return store.Entity{}, errors.New("injected: connection reset")
}

var capture = time.Date(2026, 1, 1, 0, 2, 0, 0, time.UTC)

func TestCreateWritesBothRows(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backend func(*pebble.DB) store.Backend
	}{
		{"transactor", func(db *pebble.DB) store.Backend { return db }},
		{"index first", func(db *pebble.DB) store.Backend { return plainBackend{Backend: db} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			db := openDB(t)
			repo, err := images.Open(ctx, tc.backend(db), images.Options{Kind: images.Pano})
			if err != nil {
				t.Fatal(err)
			}
			img, err := repo.Create(ctx, images.Image{CameraID: "cam-1", CapturedAt: capture.Add(123), IsClearDay: true})
			if err != nil {
				t.Fatal(err)
			}
			if img.RowKey != "2516350750799999998" || !img.CapturedAt.Equal(capture.Add(100)) {
				t.Fatalf("stored %s at %s; want row 2516350750799999998 at tick precision", img.RowKey, img.CapturedAt)
			}
			primary, index := repo.Tables()
			if primary.Name() != "PanoImageMetadata" || index.Name() != "PanoImageMetadataIndex" {
				t.Fatalf("tables %s, %s", primary.Name(), index.Name())
			}
			p, err := primary.Get(ctx, "cam-1", img.RowKey)
			if err != nil || p.Properties[images.PropIsClearDay] != true {
				t.Fatalf("primary row: %+v, %v", p, err)
			}
			ix, err := index.Get(ctx, "202601010002", img.RowKey+"_cam-1")
			if err != nil || ix.Properties[images.PropDeviceID] != "cam-1" || ix.Properties[images.PropMetadataRowKey] != img.RowKey {
				t.Fatalf("index row: %+v, %v", ix, err)
			}
		})
	}
}

// TestCreateWithoutTransactorNeverOrphansPrimary shows the order that keeps
// retention whole on a backend without transactions: when the primary write
// fails, the index row is already there (harmless), never the reverse, and
// a retry completes the pair.
func TestCreateWithoutTransactorNeverOrphansPrimary(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	broken, err := images.Open(ctx, plainBackend{Backend: db, wrap: func(t store.Table) store.Table { return failingInserts{t} }},
		images.Options{Kind: images.Single})
	if err != nil {
		t.Fatal(err)
	}
	img := images.Image{CameraID: "cam-1", CapturedAt: capture, BlobURI: "b"}
	if _, err := broken.Create(ctx, img); err == nil {
		t.Fatal("create with a failing primary write succeeded")
	}
	repo, err := images.Open(ctx, plainBackend{Backend: db}, images.Options{Kind: images.Single})
	if err != nil {
		t.Fatal(err)
	}
	primary, index := repo.Tables()
	rowKey := store.InvertedTicksRowKey(capture)
	if _, err := primary.Get(ctx, "cam-1", rowKey); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("primary row after failed create: %v, want ErrNotFound", err)
	}
	if _, err := index.Get(ctx, "202601010002", rowKey+"_cam-1"); err != nil {
		t.Fatalf("index row after failed create: %v, want it written first", err)
	}
	if _, err := repo.Create(ctx, img); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if _, err := primary.Get(ctx, "cam-1", rowKey); err != nil {
		t.Fatalf("primary row after retry: %v", err)
	}
}

// slowInserts holds every Insert back as a backend retrying with backoff
// would: until the caller's context ends, or else for stall, after which the
// write lands.
type slowInserts struct {
	store.Table
	stall time.Duration
}

func (s slowInserts) Insert(ctx context.Context, e store.Entity) (store.Entity, error) {
	select {
	case <-ctx.Done():
		return store.Entity{}, ctx.Err()
	case <-time.After(s.stall):
	}
	return s.Table.Insert(ctx, e)
}

// TestCreateWithoutTransactorGivesUpInTime shows the bound the purge relies
// on: a create whose primary write the backend keeps retrying gives up at
// CreateTimeout and never writes the primary row later, leaving only the
// harmless index row; IndexLag states the bound.
func TestCreateWithoutTransactorGivesUpInTime(t *testing.T) {
	synctest.Test(t, testCreateWithoutTransactorGivesUpInTime)
}

// testCreateWithoutTransactorGivesUpInTime runs in a bubble: its timeouts
// and the wait for the stalled write are virtual.
func testCreateWithoutTransactorGivesUpInTime(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	const timeout, margin = 100 * time.Millisecond, 50 * time.Millisecond
	slow, err := images.Open(ctx, plainBackend{Backend: db, wrap: func(t store.Table) store.Table { return slowInserts{t, 2 * time.Second} }},
		images.Options{Kind: images.Single, CreateTimeout: timeout, LandingMargin: margin})
	if err != nil {
		t.Fatal(err)
	}
	if got := slow.IndexLag(); got != timeout+margin {
		t.Fatalf("IndexLag %s, want CreateTimeout + LandingMargin = %s", got, timeout+margin)
	}
	img := images.Image{CameraID: "cam-1", CapturedAt: capture, BlobURI: "b"}
	if _, err := slow.Create(ctx, img); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("create with a primary write stalled past CreateTimeout: %v, want context.DeadlineExceeded", err)
	}
	time.Sleep(2 * time.Second) // the stalled write would have landed by now
	primary, index := slow.Tables()
	rowKey := store.InvertedTicksRowKey(capture)
	if _, err := primary.Get(ctx, "cam-1", rowKey); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("primary row after an abandoned create: %v, want ErrNotFound", err)
	}
	if _, err := index.Get(ctx, "202601010002", rowKey+"_cam-1"); err != nil {
		t.Fatalf("index row after an abandoned create: %v, want it written first", err)
	}
	atomic, err := images.Open(ctx, db, images.Options{Kind: images.Single, CreateTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	if got := atomic.IndexLag(); got != 0 {
		t.Fatalf("IndexLag with a transaction %s, want 0", got)
	}
}

func TestCreateRetryAndConflict(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		backend func(*pebble.DB) store.Backend
	}{
		{"transactor", func(db *pebble.DB) store.Backend { return db }},
		{"index first", func(db *pebble.DB) store.Backend { return plainBackend{Backend: db} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo, err := images.Open(ctx, tc.backend(openDB(t)), images.Options{Kind: images.PreStitch})
			if err != nil {
				t.Fatal(err)
			}
			img := images.Image{CameraID: "cam-1", CapturedAt: capture, PanoImageCorrelationID: "p1",
				Attributes: map[string]string{"b": "2", "a": "1"}}
			first, err := repo.Create(ctx, img)
			if err != nil {
				t.Fatal(err)
			}
			again, err := repo.Create(ctx, img)
			if err != nil || again.RowKey != first.RowKey || again.Attributes["a"] != "1" {
				t.Fatalf("identical retry: %+v, %v", again, err)
			}
			img.PanoImageCorrelationID = "p2"
			if _, err := repo.Create(ctx, img); !errors.Is(err, store.ErrAlreadyExists) {
				t.Fatalf("different image, same instant: %v, want ErrAlreadyExists", err)
			}
			got, err := repo.Latest(ctx, "cam-1", images.Span{}, images.Filter{})
			if err != nil || got.PanoImageCorrelationID != "p1" {
				t.Fatalf("stored image after conflict: %+v, %v", got, err)
			}
		})
	}
}

// barrierTable holds every Query until `width` of them are in flight at
// once, so BatchLatest passes only if it reads cameras concurrently, and
// records the most in flight, so it fails if it exceeds its bound.
type barrierTable struct {
	store.Table
	width int

	mu       sync.Mutex
	inFlight int
	maxSeen  int
	arrived  int
	gate     chan struct{}
}

func (b *barrierTable) Query(ctx context.Context, q store.Query) (store.Page, error) {
	b.mu.Lock()
	b.inFlight++
	b.maxSeen = max(b.maxSeen, b.inFlight)
	b.arrived++
	gate := b.gate
	if b.arrived%b.width == 0 {
		close(b.gate)
		b.gate = make(chan struct{})
	}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.inFlight--
		b.mu.Unlock()
	}()
	select {
	case <-gate:
	case <-ctx.Done():
		return store.Page{}, ctx.Err()
	}
	return b.Table.Query(ctx, q)
}

func TestBatchLatestReadsConcurrentlyWithinBound(t *testing.T) {
	const width = 4
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := openDB(t)
	writer, err := images.Open(ctx, db, images.Options{Kind: images.Single})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 3 * width {
		id := fmt.Sprintf("cam-%02d", i)
		ids = append(ids, id)
		if i%3 == 0 {
			continue // a camera without images is absent from the answer
		}
		for m := range 3 {
			if _, err := writer.Create(ctx, images.Image{CameraID: id, CapturedAt: capture.Add(time.Duration(m) * time.Minute)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var barrier *barrierTable
	reader, err := images.Open(ctx, plainBackend{Backend: db, wrap: func(t store.Table) store.Table {
		if t.Name() == "SingleImageMetadata" {
			barrier = &barrierTable{Table: t, width: width, gate: make(chan struct{})}
			return barrier
		}
		return t
	}}, images.Options{Kind: images.Single, BatchConcurrency: width})
	if err != nil {
		t.Fatal(err)
	}
	got, err := reader.BatchLatest(ctx, ids, images.Span{})
	if err != nil {
		t.Fatalf("BatchLatest: %v (a timeout means cameras were read one after another)", err)
	}
	if barrier.maxSeen > width {
		t.Errorf("%d cameras read at once, bound is %d", barrier.maxSeen, width)
	}
	var want []string
	for i, id := range ids {
		if i%3 != 0 {
			want = append(want, id)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("got %d images, want %d", len(got), len(want))
	}
	for i, img := range got {
		if img.CameraID != want[i] || !img.CapturedAt.Equal(capture.Add(2*time.Minute)) {
			t.Errorf("image %d: %s at %s, want %s at its newest", i, img.CameraID, img.CapturedAt, want[i])
		}
	}
}

// TestIndexShards checks where 20 cameras' index rows land against fixed
// vectors (FNV-1a 32 of the camera id, mod the shard count, computed apart
// from this code): readers outside metadatad, such as the .NET cleanup job,
// must find the same partitions, so the hash may never change.
func TestIndexShards(t *testing.T) {
	ctx := context.Background()
	eightShards := map[string]string{
		"cam-0":  "202601010002_1",
		"cam-1":  "202601010002_6",
		"cam-2":  "202601010002_3",
		"cam-3":  "202601010002_0",
		"cam-4":  "202601010002_5",
		"cam-5":  "202601010002_2",
		"cam-6":  "202601010002_7",
		"cam-7":  "202601010002_4",
		"cam-8":  "202601010002_1",
		"cam-9":  "202601010002_6",
		"cam-10": "202601010002_2",
		"cam-11": "202601010002_5",
		"cam-12": "202601010002_4",
		"cam-13": "202601010002_7",
		"cam-14": "202601010002_6",
		"cam-15": "202601010002_1",
		"cam-16": "202601010002_0",
		"cam-17": "202601010002_3",
		"cam-18": "202601010002_2",
		"cam-19": "202601010002_5",
	}
	for _, tc := range []struct {
		shards int
		want   func(camera string) string
	}{
		{0, func(string) string { return "202601010002" }},
		{1, func(string) string { return "202601010002" }},
		{8, func(camera string) string { return eightShards[camera] }},
	} {
		t.Run(fmt.Sprintf("shards=%d", tc.shards), func(t *testing.T) {
			repo, err := images.Open(ctx, openDB(t), images.Options{Kind: images.Single, IndexShards: tc.shards})
			if err != nil {
				t.Fatal(err)
			}
			for c := range 20 {
				if _, err := repo.Create(ctx, images.Image{CameraID: fmt.Sprintf("cam-%d", c), CapturedAt: capture}); err != nil {
					t.Fatal(err)
				}
			}
			_, index := repo.Tables()
			page, err := index.Scan(ctx, store.Scan{})
			if err != nil || len(page.Entities) != 20 {
				t.Fatalf("index rows: %d, %v", len(page.Entities), err)
			}
			for _, e := range page.Entities {
				camera := e.Properties[images.PropDeviceID].(string)
				if want := tc.want(camera); e.PartitionKey != want {
					t.Errorf("index row of %s in partition %q, want %q", camera, e.PartitionKey, want)
				}
			}
		})
	}
	for _, v := range []struct {
		camera string
		shards int
		want   string
	}{
		{"cam-1", 3, "202601010002_1"},
		{"a", 1000, "202601010002_220"},
		{"cam-1", 2, "202601010002_0"},
	} {
		if got := images.IndexPartitionKey(capture, v.camera, v.shards); got != v.want {
			t.Errorf("IndexPartitionKey(%s, %d shards) = %q, want %q", v.camera, v.shards, got, v.want)
		}
	}
	if _, err := images.Open(ctx, openDB(t), images.Options{Kind: images.Single, IndexShards: -1}); err == nil {
		t.Fatal("negative IndexShards accepted")
	}
}
