package images_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metadatad/metadatad/internal/azurite"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/aztable"
	"github.com/metadatad/metadatad/store/images"
)

func TestMain(m *testing.M) { os.Exit(azurite.Main(m)) }

// backendCase is a backend every pointer test runs on.
type backendCase struct {
	name string
	open func(t *testing.T) store.Backend
}

// backends are the embedded store with its transaction, the embedded store
// without it (the index-first path Azure takes), and Azure itself.
var backends = []backendCase{
	{"pebble", func(t *testing.T) store.Backend { return openDB(t) }},
	{"index first", func(t *testing.T) store.Backend { return plainBackend{Backend: openDB(t)} }},
	{"azure", openAzure},
}

func openAzure(t *testing.T) store.Backend {
	t.Helper()
	conn := azurite.Require(t)
	var id [5]byte
	_, _ = rand.Read(id[:])
	backend, err := aztable.Open(t.Context(), aztable.Options{ConnectionString: conn, TablePrefix: "t" + hex.EncodeToString(id[:])})
	if err != nil {
		t.Fatal(err)
	}
	return backend
}

// rowCounter counts the rows a repository reads: each primary row a query
// passed over (matching or not, as the backend had to read it to decide)
// and each row Get returned.
type rowCounter struct {
	primary  string
	visited  atomic.Int64
	pointers atomic.Int64
}

func (c *rowCounter) reset() { c.visited.Store(0); c.pointers.Store(0) }

// backend wraps b so that its reads are counted. It hides any Transactor:
// the counted repository only reads.
func (c *rowCounter) backend(b store.Backend) store.Backend {
	return plainBackend{Backend: b, wrap: func(t store.Table) store.Table { return &countingTable{Table: t, c: c} }}
}

type countingTable struct {
	store.Table
	c *rowCounter
}

func (t *countingTable) Get(ctx context.Context, pk, rk string) (store.Entity, error) {
	e, err := t.Table.Get(ctx, pk, rk)
	if t.Name() == t.c.primary {
		t.c.visited.Add(1)
	} else {
		t.c.pointers.Add(1)
	}
	return e, err
}

// Query counts the rows between where the page started and where it
// stopped, read again without the filter.
func (t *countingTable) Query(ctx context.Context, q store.Query) (store.Page, error) {
	page, err := t.Table.Query(ctx, q)
	if err != nil || t.Name() != t.c.primary {
		return page, err
	}
	all := store.Query{PartitionKey: q.PartitionKey, Rows: q.Rows, Resume: q.Resume}
	if page.Next != nil {
		all.Rows.To = page.Next.RowKey
	}
	for {
		p, err := t.Table.Query(ctx, all)
		if err != nil {
			return store.Page{}, err
		}
		t.c.visited.Add(int64(len(p.Entities)))
		if p.Next == nil {
			return page, nil
		}
		all.Resume = p.Next
	}
}

var day0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// minute is the capture time of a camera's n-th image, one a minute.
func minute(n int) time.Time { return day0.Add(time.Duration(n) * time.Minute) }

func openRepo(t testing.TB, b store.Backend, kind images.Kind) *images.Repository {
	t.Helper()
	repo, err := images.Open(t.Context(), b, images.Options{Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

func create(t *testing.T, repo *images.Repository, img images.Image) images.Image {
	t.Helper()
	stored, err := repo.Create(t.Context(), img)
	if err != nil {
		t.Fatalf("create %s at %s: %v", img.CameraID, img.CapturedAt, err)
	}
	return stored
}

// TestFilteredReadsStayBoundedWithHistory: a camera with a long history and
// no clear day (or no image of a correlation id) reads a few rows per call,
// not its history; before the pointers each call read all 200 rows.
func TestFilteredReadsStayBoundedWithHistory(t *testing.T) {
	const history = 200
	for _, bc := range backends {
		t.Run(bc.name, func(t *testing.T) {
			b := bc.open(t)
			pano, pre := openRepo(t, b, images.Pano), openRepo(t, b, images.PreStitch)
			for n := range history {
				create(t, pano, images.Image{CameraID: "cam", CapturedAt: minute(n)})
				create(t, pre, images.Image{CameraID: "cam", CapturedAt: minute(n), PanoImageCorrelationID: fmt.Sprintf("p%d", n)})
			}
			for _, tc := range []struct {
				name  string
				kind  images.Kind
				read  func(*images.Repository) (int, error)
				found int
			}{
				{"no clear day", images.Pano, func(r *images.Repository) (int, error) {
					_, err := r.Latest(t.Context(), "cam", images.Span{}, images.Filter{ClearDayOnly: true})
					if errors.Is(err, store.ErrNotFound) {
						return 0, nil
					}
					return 1, err
				}, 0},
				{"unknown correlation", images.PreStitch, listCorrelation(t, "none"), 0},
				{"one correlation", images.PreStitch, listCorrelation(t, "p3"), 1},
			} {
				t.Run(tc.name, func(t *testing.T) {
					c := &rowCounter{primary: tc.kind.DefaultTable()}
					reader := openRepo(t, c.backend(b), tc.kind)
					for call := range 3 {
						c.reset()
						got, err := tc.read(reader)
						if err != nil || got != tc.found {
							t.Fatalf("call %d: %d images, %v; want %d", call, got, err, tc.found)
						}
						// The first call backfills the camera's pointers once.
						if call > 0 && (c.visited.Load() > 2 || c.pointers.Load() > 2) {
							t.Errorf("call %d read %d primary rows and %d pointer rows of a %d-image history; want at most 2 each",
								call, c.visited.Load(), c.pointers.Load(), history)
						}
					}
				})
			}
		})
	}
}

func listCorrelation(t *testing.T, id string) func(*images.Repository) (int, error) {
	return func(r *images.Repository) (int, error) {
		imgs, err := correlated(t.Context(), r, "cam", id)
		return len(imgs), err
	}
}

// correlated lists every image of a correlation id, a page of one at a time.
func correlated(ctx context.Context, r *images.Repository, camera, id string) ([]images.Image, error) {
	var out []images.Image
	var resume *store.Cursor
	for {
		page, next, err := r.List(ctx, images.ListOptions{CameraID: camera, Filter: images.Filter{CorrelationID: id}, Limit: 1, Resume: resume})
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if next == nil {
			return out, nil
		}
		resume = next
	}
}

func latestClearDay(t *testing.T, r *images.Repository, camera string) (time.Time, bool) {
	t.Helper()
	img, err := r.Latest(t.Context(), camera, images.Span{}, images.Filter{ClearDayOnly: true})
	if errors.Is(err, store.ErrNotFound) {
		return time.Time{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return img.CapturedAt, true
}

// purge deletes an image's rows as the retention engine does.
func purge(t *testing.T, r *images.Repository, camera string, at time.Time) {
	t.Helper()
	primary, index := r.Tables()
	rk := store.InvertedTicksRowKey(at)
	if err := primary.Delete(t.Context(), camera, rk, ""); err != nil {
		t.Fatal(err)
	}
	if err := index.Delete(t.Context(), images.IndexPartitionKey(at, camera, 0), images.IndexRowKey(rk, camera), ""); err != nil {
		t.Fatal(err)
	}
}

// TestClearDayPointer: newer and older creates, retries, a purge of the
// image pointed to (the read falls back to what the purge left: an older
// clear day, or one uploaded late), a purge of all.
func TestClearDayPointer(t *testing.T) {
	for _, bc := range backends {
		t.Run(bc.name, func(t *testing.T) {
			repo := openRepo(t, bc.open(t), images.Pano)
			clear := func(n int) { create(t, repo, images.Image{CameraID: "cam", CapturedAt: minute(n), IsClearDay: true}) }
			cloudy := func(n int) { create(t, repo, images.Image{CameraID: "cam", CapturedAt: minute(n)}) }
			want := func(step string, n int, found bool) {
				t.Helper()
				got, ok := latestClearDay(t, repo, "cam")
				if ok != found || (found && !got.Equal(minute(n))) {
					t.Fatalf("%s: latest clear day %s (found %v), want minute %d (found %v)", step, got, ok, n, found)
				}
			}
			want("empty camera", 0, false)
			cloudy(5)
			want("cloudy only", 0, false)
			clear(10)
			want("first clear day", 10, true)
			clear(8)
			want("older clear day", 10, true)
			clear(20)
			cloudy(30)
			want("newer clear day", 20, true)
			clear(20)
			want("identical retry", 20, true)
			purge(t, repo, "cam", minute(20))
			want("pointed image purged", 10, true)
			purge(t, repo, "cam", minute(10))
			purge(t, repo, "cam", minute(8))
			want("every clear day purged", 0, false)
			clear(2)
			want("late upload of an old clear day", 2, true)
			clear(40)
			want("new clear day after the purge", 40, true)
			if got, ok := latestClearDay(t, repo, "other"); ok {
				t.Fatalf("other camera: %s", got)
			}
		})
	}
}

// TestCorrelationPointer: a correlation id's images, created out of order
// among others', are listed whole, newest first, and only they; purged ones
// are gone from the list; later ones are found again.
func TestCorrelationPointer(t *testing.T) {
	for _, bc := range backends {
		t.Run(bc.name, func(t *testing.T) {
			repo := openRepo(t, bc.open(t), images.PreStitch)
			for _, c := range []struct {
				n  int
				id string
			}{{10, "a"}, {11, "b"}, {12, "a"}, {5, "a"}, {13, "c"}, {20, "a"}, {12, "a"}, {3, "b"}} {
				create(t, repo, images.Image{CameraID: "cam", CapturedAt: minute(c.n), PanoImageCorrelationID: c.id})
			}
			create(t, repo, images.Image{CameraID: "other", CapturedAt: minute(15), PanoImageCorrelationID: "a"})
			want := func(step, id string, ns ...int) {
				t.Helper()
				imgs, err := correlated(t.Context(), repo, "cam", id)
				if err != nil {
					t.Fatal(err)
				}
				var got []int
				for _, img := range imgs {
					if img.PanoImageCorrelationID != id {
						t.Fatalf("%s: image of %q listed for %q", step, img.PanoImageCorrelationID, id)
					}
					got = append(got, int(img.CapturedAt.Sub(day0)/time.Minute))
				}
				if !slices.Equal(got, ns) {
					t.Fatalf("%s: %q lists minutes %v, want %v", step, id, got, ns)
				}
			}
			want("created", "a", 20, 12, 10, 5)
			want("created", "b", 11, 3)
			want("unknown", "z")
			purge(t, repo, "cam", minute(20))
			purge(t, repo, "cam", minute(5))
			want("newest and oldest purged", "a", 12, 10)
			purge(t, repo, "cam", minute(12))
			purge(t, repo, "cam", minute(10))
			want("all purged", "a")
			create(t, repo, images.Image{CameraID: "cam", CapturedAt: minute(1), PanoImageCorrelationID: "a"})
			create(t, repo, images.Image{CameraID: "cam", CapturedAt: minute(50), PanoImageCorrelationID: "a"})
			want("created after the purge", "a", 50, 1)
		})
	}
}

// failingPointers fails every write to the pointer table, as a crash
// between a create's primary row and its pointer would.
type failingPointers struct{ store.Table }

func (f failingPointers) Insert(context.Context, store.Entity) (store.Entity, error) {
	return store.Entity{}, errors.New("injected: connection reset")
}

func (f failingPointers) Update(context.Context, store.Entity, store.WriteMode, string) (store.Entity, error) {
	return store.Entity{}, errors.New("injected: connection reset")
}

// TestCreateStoppedBeforeItsPointer: on the index-first path a create that
// stops after its primary row is not acknowledged; its retry, which finds
// the image stored, writes the pointer, so the acknowledged image is found.
func TestCreateStoppedBeforeItsPointer(t *testing.T) {
	for _, kind := range []images.Kind{images.Pano, images.PreStitch} {
		t.Run(kind.String(), func(t *testing.T) {
			db := openDB(t)
			healthy := openRepo(t, plainBackend{Backend: db}, kind)
			// Cover the camera first, so only the pointer can find the image.
			if _, _, err := healthy.List(t.Context(), images.ListOptions{CameraID: "cam", Limit: 1,
				Filter: images.Filter{ClearDayOnly: kind == images.Pano, CorrelationID: correlationOf(kind)}}); err != nil {
				t.Fatal(err)
			}
			broken := openRepo(t, plainBackend{Backend: db, wrap: func(t store.Table) store.Table {
				if t.Name() == images.PointerTable(kind.DefaultTable()) {
					return failingPointers{t}
				}
				return t
			}}, kind)
			img := images.Image{CameraID: "cam", CapturedAt: minute(1), IsClearDay: kind == images.Pano, PanoImageCorrelationID: correlationOf(kind)}
			if _, err := broken.Create(t.Context(), img); err == nil {
				t.Fatal("create whose pointer write failed was acknowledged")
			}
			create(t, healthy, img)
			filter := images.Filter{ClearDayOnly: kind == images.Pano, CorrelationID: correlationOf(kind)}
			got, _, err := healthy.List(t.Context(), images.ListOptions{CameraID: "cam", Filter: filter, Limit: 10})
			if err != nil || len(got) != 1 || !got[0].CapturedAt.Equal(minute(1)) {
				t.Fatalf("after the retry: %+v, %v; want the image", got, err)
			}
		})
	}
}

func correlationOf(kind images.Kind) string {
	if kind == images.PreStitch {
		return "p"
	}
	return ""
}

// TestConcurrentCreatesWidenOnePointer: creates of one correlation id and
// of clear days racing on one camera's pointer rows all end up found.
func TestConcurrentCreatesWidenOnePointer(t *testing.T) {
	const writers, each = 8, 6
	for _, bc := range backends {
		t.Run(bc.name, func(t *testing.T) {
			b := bc.open(t)
			pano, pre := openRepo(t, b, images.Pano), openRepo(t, b, images.PreStitch)
			// Cover the camera first, so the reads below use the pointers
			// as the creates left them, not a backfill.
			if _, err := correlated(t.Context(), pre, "cam", "p"); err != nil {
				t.Fatal(err)
			}
			latestClearDay(t, pano, "cam")
			var wg sync.WaitGroup
			errs := make(chan error, writers*each*2)
			for w := range writers {
				wg.Go(func() {
					for i := range each {
						at := minute(w + i*writers)
						if _, err := pre.Create(t.Context(), images.Image{CameraID: "cam", CapturedAt: at, PanoImageCorrelationID: "p"}); err != nil {
							errs <- err
						}
						if _, err := pano.Create(t.Context(), images.Image{CameraID: "cam", CapturedAt: at, IsClearDay: true}); err != nil {
							errs <- err
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			imgs, err := correlated(t.Context(), pre, "cam", "p")
			if err != nil || len(imgs) != writers*each {
				t.Fatalf("listed %d of %d images, %v", len(imgs), writers*each, err)
			}
			if got, ok := latestClearDay(t, pano, "cam"); !ok || !got.Equal(minute(writers*each-1)) {
				t.Fatalf("latest clear day %s, want minute %d", got, writers*each-1)
			}
		})
	}
}

// TestBackfillOfImagesWithoutPointers: images stored without pointer rows
// (by an earlier version, or copied without the pointer table) are found by
// the first read, which covers the camera; later creates keep it covered.
func TestBackfillOfImagesWithoutPointers(t *testing.T) {
	for _, bc := range backends {
		t.Run(bc.name, func(t *testing.T) {
			b := bc.open(t)
			pano, pre := openRepo(t, b, images.Pano), openRepo(t, b, images.PreStitch)
			for _, r := range []*images.Repository{pano, pre} {
				primary, _ := r.Tables()
				var ops []store.Op
				for n := range 50 {
					rk := store.InvertedTicksRowKey(minute(n))
					ops = append(ops, store.Op{Kind: store.OpInsert, Entity: store.Entity{PartitionKey: "cam", RowKey: rk, Properties: store.Properties{
						images.PropCameraID: "cam", images.PropCapturedAt: minute(n),
						images.PropIsClearDay: n == 7, images.PropCorrelationID: fmt.Sprintf("p%d", n%5)}}})
				}
				if err := primary.Batch(t.Context(), ops); err != nil {
					t.Fatal(err)
				}
			}
			if got, ok := latestClearDay(t, pano, "cam"); !ok || !got.Equal(minute(7)) {
				t.Fatalf("latest clear day of stored images %s, want minute 7", got)
			}
			if imgs, err := correlated(t.Context(), pre, "cam", "p2"); err != nil || len(imgs) != 10 {
				t.Fatalf("stored images of p2: %d, %v; want 10", len(imgs), err)
			}
			create(t, pre, images.Image{CameraID: "cam", CapturedAt: minute(100), PanoImageCorrelationID: "p2"})
			if imgs, err := correlated(t.Context(), pre, "cam", "p2"); err != nil || len(imgs) != 11 {
				t.Fatalf("images of p2 after a create: %d, %v; want 11", len(imgs), err)
			}
		})
	}
}
