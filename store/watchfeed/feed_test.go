package watchfeed

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
)

var now = time.Date(2026, 3, 1, 12, 30, 20, 0, time.UTC)

func openDB(t *testing.T) *pebble.DB {
	t.Helper()
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// plainBackend hides the Transactor of the backend it wraps, as Azure Table
// Storage has none: creates write the index row first.
type plainBackend struct{ store.Backend }

// newFeed is a feed of single images on a fresh embedded store, on a clock
// the test sets, with an index of 4 shards.
func newFeed(t *testing.T, backend store.Backend, opts Options) (*Feed, *images.Repository, *time.Time) {
	t.Helper()
	return newFeedSharded(t, backend, opts, 4)
}

// newFeedSharded is newFeed with an index of shards partitions a minute.
func newFeedSharded(t *testing.T, backend store.Backend, opts Options, shards int) (*Feed, *images.Repository, *time.Time) {
	t.Helper()
	repo, err := images.Open(t.Context(), backend, images.Options{Kind: images.Single, IndexShards: shards,
		CreateTimeout: time.Second, LandingMargin: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	clock := now
	opts.Repo, opts.Now = repo, func() time.Time { return clock }
	f, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return f, repo, &clock
}

func create(t *testing.T, repo *images.Repository, camera string, at time.Time) images.Image {
	t.Helper()
	img, err := repo.Create(t.Context(), images.Image{CameraID: camera, CapturedAt: at, BlobURI: "blob://" + camera})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func subscribe(t *testing.T, f *Feed, cameras ...string) *Subscription {
	t.Helper()
	sub, err := f.Subscribe(t.Context(), cameras)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	return sub
}

// received drains what sub holds now.
func received(sub *Subscription) []string {
	var got []string
	for {
		select {
		case ev := <-sub.Events():
			got = append(got, ev.Image.CameraID+"@"+ev.Image.CapturedAt.Format("15:04:05.000"))
		default:
			return got
		}
	}
}

func TestPublishDropsAFullSubscriptionWithoutBlocking(t *testing.T) {
	f, _, _ := newFeed(t, openDB(t), Options{Buffer: 2})
	slow := subscribe(t, f, "cam-a")
	other := subscribe(t, f, "cam-b")
	for i := range 3 {
		f.Publish(images.Image{CameraID: "cam-a", CapturedAt: now.Add(time.Duration(i) * time.Second)})
	}
	f.Publish(images.Image{CameraID: "cam-b", CapturedAt: now})
	select {
	case <-slow.Behind():
	default:
		t.Fatal("a subscription whose buffer overflowed is not behind")
	}
	if got := received(slow); len(got) != 2 {
		t.Fatalf("behind subscription holds %v, want the 2 its buffer took", got)
	}
	f.Publish(images.Image{CameraID: "cam-a", CapturedAt: now.Add(time.Minute)})
	if got := received(slow); len(got) != 0 {
		t.Fatalf("a dropped subscription got %v", got)
	}
	if got := received(other); !slices.Equal(got, []string{"cam-b@12:30:20.000"}) {
		t.Fatalf("other subscription got %v", got)
	}
}

func TestCloseStopsDelivery(t *testing.T) {
	f, _, _ := newFeed(t, openDB(t), Options{})
	sub := subscribe(t, f, "cam-a")
	sub.Close()
	sub.Close()
	f.Publish(images.Image{CameraID: "cam-a", CapturedAt: now})
	if got := received(sub); len(got) != 0 {
		t.Fatalf("closed subscription got %v", got)
	}
	if len(f.subs) != 0 {
		t.Fatal("camera still watched after its only subscription closed")
	}
}

func TestPublishLeavesOutCapturesOutsideTheWindow(t *testing.T) {
	f, _, _ := newFeed(t, openDB(t), Options{Window: 5 * time.Minute})
	sub := subscribe(t, f, "cam-a")
	for _, at := range []time.Duration{-6 * time.Minute, -4 * time.Minute, 4 * time.Minute, 6 * time.Minute} {
		f.Publish(images.Image{CameraID: "cam-a", CapturedAt: now.Add(at)})
	}
	if got := received(sub); !slices.Equal(got, []string{"cam-a@12:26:20.000", "cam-a@12:34:20.000"}) {
		t.Fatalf("got %v, want the two captures within 5 minutes", got)
	}
}

func TestStampsNeverGoBack(t *testing.T) {
	f, _, clock := newFeed(t, openDB(t), Options{})
	sub := subscribe(t, f, "cam-a")
	f.Publish(images.Image{CameraID: "cam-a", CapturedAt: now})
	*clock = now.Add(-time.Second)
	f.Publish(images.Image{CameraID: "cam-a", CapturedAt: now})
	first, second := <-sub.Events(), <-sub.Events()
	if second.Stamp.Before(first.Stamp) || first.Stamp.Before(sub.Start()) {
		t.Fatalf("stamps start %s, %s, %s: went back", sub.Start(), first.Stamp, second.Stamp)
	}
}

// tailMode is a way the tail reads: the watched cameras' primary
// partitions, or the index when the subscription watches more cameras
// than the window has index partitions (11 minutes of one shard).
type tailMode struct {
	name string
	// idle are cameras watched besides the test's, that never capture.
	idle []string
	// scans is whether a pass scans the index.
	scans bool
}

var tailModes = []tailMode{
	{name: "by camera"},
	{name: "by index", idle: idleCameras(11), scans: true},
}

func idleCameras(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "idle-" + strconv.Itoa(i)
	}
	return ids
}

// forEachMode runs test with a tailing feed on a store without
// transactions, whose tables count their reads, in each tailMode; watch
// adds the mode's idle cameras to a subscription's.
func forEachMode(t *testing.T, test func(t *testing.T, f *Feed, repo *images.Repository, clock *time.Time, reads *readCounts, watch func(...string) *Subscription)) {
	for _, mode := range tailModes {
		t.Run(mode.name, func(t *testing.T) {
			reads := &readCounts{}
			f, repo, clock := newFeedSharded(t, countingBackend{Backend: plainBackend{openDB(t)}, counts: reads}, Options{Poll: time.Second}, 1)
			watch := func(cameras ...string) *Subscription { return subscribe(t, f, append(cameras, mode.idle...)...) }
			test(t, f, repo, clock, reads, watch)
			if scanned := reads.scans(images.IndexTable(images.Single.DefaultTable())) > 0; scanned != mode.scans {
				t.Errorf("the passes scanned the index: %v, want %v", scanned, mode.scans)
			}
		})
	}
}

func TestTailFeedsNewRowsOfWatchedCameras(t *testing.T) {
	forEachMode(t, func(t *testing.T, f *Feed, repo *images.Repository, clock *time.Time, _ *readCounts, watch func(...string) *Subscription) {
		tl := f.tail
		create(t, repo, "cam-a", now.Add(-time.Minute)) // exists before the watch
		sub := watch("cam-a")
		create(t, repo, "cam-a", now.Add(-90*time.Second)) // late, yet within the window
		create(t, repo, "cam-b", now)                      // not watched
		create(t, repo, "cam-a", now.Add(time.Second))
		// An index row whose primary row has not landed yet.
		pendingAt := now.Add(2 * time.Second)
		_, index := repo.Tables()
		rowKey := store.InvertedTicksRowKey(pendingAt)
		if _, err := index.Upsert(t.Context(), store.Entity{
			PartitionKey: images.IndexPartitionKey(pendingAt, "cam-a", 1), RowKey: images.IndexRowKey(rowKey, "cam-a"),
			Properties: store.Properties{images.PropDeviceID: "cam-a", images.PropMetadataRowKey: rowKey},
		}, store.Replace); err != nil {
			t.Fatal(err)
		}
		if err := tl.pass(t.Context()); err != nil {
			t.Fatal(err)
		}
		want := []string{"cam-a@12:28:50.000", "cam-a@12:30:21.000"}
		if got := received(sub); !slices.Equal(got, want) {
			t.Fatalf("first pass fed %v, want %v: the existing image is not new, cam-b is not watched", got, want)
		}
		primary, _ := repo.Tables()
		if _, err := primary.Insert(t.Context(), store.Entity{PartitionKey: "cam-a", RowKey: rowKey,
			Properties: store.Properties{images.PropCameraID: "cam-a", images.PropCapturedAt: pendingAt}}); err != nil {
			t.Fatal(err)
		}
		*clock = now.Add(time.Second)
		if err := tl.pass(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := received(sub); !slices.Equal(got, []string{"cam-a@12:30:22.000"}) {
			t.Fatalf("pass after the primary row landed fed %v", got)
		}
		*clock = now.Add(time.Hour)
		if err := tl.pass(t.Context()); err != nil {
			t.Fatal(err)
		}
		if st := tl.cameras["cam-a"]; len(st.seen) != 0 || len(st.missing) != 0 {
			t.Fatalf("tail still remembers %d images and %d missing rows that left the window", len(st.seen), len(st.missing))
		}
	})
}

// TestWatchBegunBeforeThePrimaryLandsGetsIt: on a store without
// transactions a create writes its index row, then its primary row. The
// index row of a camera nobody watches is there; a watch of the camera then
// begins, and the primary row lands after it: the image became readable
// while the watch was open, so the watch receives it. An image readable
// before the watch began is not fed to it.
func TestWatchBegunBeforeThePrimaryLandsGetsIt(t *testing.T) {
	forEachMode(t, func(t *testing.T, f *Feed, repo *images.Repository, clock *time.Time, _ *readCounts, watch func(...string) *Subscription) {
		tl := f.tail
		create(t, repo, "cam-y", now) // readable before the watch
		landsAt := now.Add(time.Second)
		_, index := repo.Tables()
		rowKey := store.InvertedTicksRowKey(landsAt)
		if _, err := index.Upsert(t.Context(), store.Entity{
			PartitionKey: images.IndexPartitionKey(landsAt, "cam-x", 1), RowKey: images.IndexRowKey(rowKey, "cam-x"),
			Properties: store.Properties{images.PropDeviceID: "cam-x", images.PropMetadataRowKey: rowKey},
		}, store.Replace); err != nil {
			t.Fatal(err)
		}
		*clock = now.Add(time.Second)
		if err := tl.pass(t.Context()); err != nil { // neither camera watched yet
			t.Fatal(err)
		}
		sub := watch("cam-x", "cam-y")
		if err := tl.pass(t.Context()); err != nil { // the index row, still without its primary row
			t.Fatal(err)
		}
		primary, _ := repo.Tables()
		if _, err := primary.Insert(t.Context(), store.Entity{PartitionKey: "cam-x", RowKey: rowKey,
			Properties: store.Properties{images.PropCameraID: "cam-x", images.PropCapturedAt: landsAt}}); err != nil {
			t.Fatal(err)
		}
		*clock = now.Add(2 * time.Second)
		if err := tl.pass(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got, want := received(sub), []string{"cam-x@12:30:21.000"}; !slices.Equal(got, want) {
			t.Fatalf("fed %v, want %v: cam-x's image landed after the watch began, cam-y's before", got, want)
		}
		sub.Close()
		if len(tl.cameras) != 0 {
			t.Fatalf("tail still holds the state of %d cameras nobody watches", len(tl.cameras))
		}
	})
}

func TestSinceReadsEachCameraInCaptureOrder(t *testing.T) {
	f, repo, _ := newFeed(t, openDB(t), Options{})
	var want []string
	// Created newest first, across two minutes and the index's 4 shards.
	for i := 9; i >= 0; i-- {
		at := now.Add(-time.Duration(i) * 20 * time.Second)
		for c := range 5 {
			create(t, repo, "cam-"+strconv.Itoa(c), at)
		}
	}
	create(t, repo, "cam-1", now.Add(-time.Hour)) // before the stamp's reach
	var got []string
	cameras := map[string]bool{"cam-1": true, "cam-3": true}
	if err := f.Since(t.Context(), cameras, now.Add(-time.Minute), func(img images.Image) error {
		got = append(got, img.CameraID+"@"+img.CapturedAt.Format("15:04:05"))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, camera := range []string{"cam-1", "cam-3"} {
		var mine []string
		for _, g := range got {
			if g[:5] == camera {
				mine = append(mine, g)
			}
		}
		if len(mine) != 10 || !slices.IsSorted(mine) {
			t.Errorf("%s: got %v, want its 10 images in capture order", camera, mine)
		}
		want = append(want, mine...)
	}
	if len(got) != len(want) {
		t.Errorf("got %v: images of cameras not asked for", got)
	}
}
