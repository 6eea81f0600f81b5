package fleet_test

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/internal/azurite"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/aztable"
	"github.com/metadatad/metadatad/store/fleet"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
)

func TestMain(m *testing.M) { os.Exit(azurite.Main(m)) }

// clock is a test's settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// harness is one backend's view of single images, with the repository
// that writes them and, on Azure, the recorder the repository tells.
type harness struct {
	repo     *images.Repository
	view     *fleet.View
	recorder *fleet.Recorder
	clock    *clock
	// embedded is the embedded store (nil on Azure); cameras the camera
	// table (nil on the embedded store).
	embedded *pebble.DB
	cameras  store.Table
}

// backends open the view on each backend at the given time.
var backends = []struct {
	name string
	open func(t *testing.T, now time.Time) *harness
}{
	{"embedded", openEmbedded},
	{"azure", openAzure},
}

func openEmbedded(t *testing.T, now time.Time) *harness {
	t.Helper()
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	repo, err := images.Open(t.Context(), db, images.Options{Kind: images.Single})
	if err != nil {
		t.Fatal(err)
	}
	primary, _ := repo.Tables()
	if err := db.Tally(t.Context(), primary.Name()); err != nil {
		t.Fatal(err)
	}
	c := &clock{t: now}
	view, err := fleet.Open(fleet.Options{Repo: repo, Embedded: db, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{repo: repo, view: view, clock: c, embedded: db}
}

func openAzure(t *testing.T, now time.Time) *harness {
	t.Helper()
	conn := azurite.Require(t)
	var id [5]byte
	_, _ = rand.Read(id[:])
	backend, err := aztable.Open(t.Context(), aztable.Options{ConnectionString: conn, TablePrefix: "t" + hex.EncodeToString(id[:])})
	if err != nil {
		t.Fatal(err)
	}
	cameras, err := fleet.OpenCameraTable(t.Context(), backend, images.Single.DefaultTable())
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: now}
	rec, err := fleet.NewRecorder(fleet.RecorderOptions{Table: cameras, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	repo, err := images.Open(t.Context(), backend, images.Options{Kind: images.Single, Created: rec.Created})
	if err != nil {
		t.Fatal(err)
	}
	view, err := fleet.Open(fleet.Options{Repo: repo, Cameras: cameras, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{repo: repo, view: view, recorder: rec, clock: c, cameras: cameras}
}

// create stores an image of the camera at each instant, one call each.
func (h *harness) create(t *testing.T, camera string, at ...time.Time) {
	t.Helper()
	for _, a := range at {
		if _, err := h.repo.Create(t.Context(), images.Image{CameraID: camera, CapturedAt: a, BlobURI: "blob://" + camera}); err != nil {
			t.Fatal(err)
		}
	}
}

// batch stores images of the camera at the instants in batches.
func (h *harness) batch(t *testing.T, camera string, at []time.Time) {
	t.Helper()
	for len(at) > 0 {
		n := min(len(at), images.MaxBatchCreate)
		imgs := make([]images.Image, n)
		for i, a := range at[:n] {
			imgs[i] = images.Image{CameraID: camera, CapturedAt: a, BlobURI: "b"}
		}
		for _, r := range h.repo.BatchCreate(t.Context(), imgs) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		at = at[n:]
	}
}

// every is the instants from start, step apart, before end.
func every(start, end time.Time, step time.Duration) []time.Time {
	var out []time.Time
	for t := start; t.Before(end); t = t.Add(step) {
		out = append(out, t)
	}
	return out
}

// settle lets the recorder's interval pass and writes what it holds
// pending, as its Run would: on Azure the camera rows then hold every
// image created so far.
func (h *harness) settle(t *testing.T) {
	t.Helper()
	if h.recorder == nil {
		return
	}
	h.clock.add(fleet.DefaultInterval)
	if _, err := h.recorder.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
}
