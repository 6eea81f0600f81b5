package watchfeed

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// readCounts counts the reads of a countingBackend's tables.
type readCounts struct {
	mu sync.Mutex
	// calls counts per table and method ("Get", "Query", "Scan").
	calls map[string]map[string]int
	// queried lists the partitions queried, per table, in order.
	queried map[string][]string
}

func (c *readCounts) add(table, method, partition string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls, c.queried = make(map[string]map[string]int), make(map[string][]string)
	}
	if c.calls[table] == nil {
		c.calls[table] = make(map[string]int)
	}
	c.calls[table][method]++
	if method == "Query" {
		c.queried[table] = append(c.queried[table], partition)
	}
}

// total is every read of every table.
func (c *readCounts) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, methods := range c.calls {
		for _, calls := range methods {
			n += calls
		}
	}
	return n
}

func (c *readCounts) scans(table string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[table]["Scan"]
}

// partitions are the distinct partitions queried of table, sorted.
func (c *readCounts) partitions(table string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := slices.Clone(c.queried[table])
	slices.Sort(p)
	return slices.Compact(p)
}

func (c *readCounts) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls, c.queried = nil, nil
}

// countingBackend counts the reads of its tables.
type countingBackend struct {
	store.Backend
	counts *readCounts
}

func (b countingBackend) Table(ctx context.Context, name string) (store.Table, error) {
	t, err := b.Backend.Table(ctx, name)
	if err != nil {
		return nil, err
	}
	return countingTable{Table: t, counts: b.counts}, nil
}

type countingTable struct {
	store.Table
	counts *readCounts
}

func (t countingTable) Get(ctx context.Context, partitionKey, rowKey string) (store.Entity, error) {
	t.counts.add(t.Name(), "Get", partitionKey)
	return t.Table.Get(ctx, partitionKey, rowKey)
}

func (t countingTable) Query(ctx context.Context, q store.Query) (store.Page, error) {
	t.counts.add(t.Name(), "Query", q.PartitionKey)
	return t.Table.Query(ctx, q)
}

func (t countingTable) Scan(ctx context.Context, s store.Scan) (store.Page, error) {
	t.counts.add(t.Name(), "Scan", "")
	return t.Table.Scan(ctx, s)
}

var (
	primaryName = images.Single.DefaultTable()
	indexName   = images.IndexTable(primaryName)
)

// TestTailWithoutSubscriptionsReadsNothing: with no Watch open a replica's
// tail costs the store nothing, before any watch and after the last one
// closed.
func TestTailWithoutSubscriptionsReadsNothing(t *testing.T) {
	reads := &readCounts{}
	f, repo, clock := newFeed(t, countingBackend{Backend: plainBackend{openDB(t)}, counts: reads}, Options{Poll: time.Second})
	create(t, repo, "cam-a", now)
	steps := func() {
		t.Helper()
		for i := range 5 {
			*clock = clock.Add(time.Second)
			create(t, repo, "cam-a", clock.Add(time.Duration(i)*time.Millisecond))
			reads.reset()
			if err := f.tail.pass(t.Context()); err != nil {
				t.Fatal(err)
			}
			if n := reads.total(); n != 0 {
				t.Fatalf("a pass with no subscription made %d store reads", n)
			}
		}
	}
	steps()
	sub := subscribe(t, f, "cam-a")
	if err := f.tail.pass(t.Context()); err != nil {
		t.Fatal(err)
	}
	sub.Close()
	steps()
}

// TestTailReadsOnlyTheWatchedCameras: a watch of a few cameras costs a
// query of each one's primary partition a pass, and nothing of the other
// cameras or of the index.
func TestTailReadsOnlyTheWatchedCameras(t *testing.T) {
	reads := &readCounts{}
	f, repo, clock := newFeed(t, countingBackend{Backend: plainBackend{openDB(t)}, counts: reads}, Options{Poll: time.Second})
	for c := range 20 {
		create(t, repo, "cam-"+strconv.Itoa(c), now.Add(-time.Minute))
	}
	sub := subscribe(t, f, "cam-1", "cam-2")
	for step := range 3 {
		*clock = now.Add(time.Duration(step+1) * time.Second)
		for c := range 20 {
			create(t, repo, "cam-"+strconv.Itoa(c), *clock)
		}
		reads.reset()
		if err := f.tail.pass(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got, want := reads.partitions(primaryName), []string{"cam-1", "cam-2"}; !slices.Equal(got, want) || reads.total() != 2 {
			t.Fatalf("pass %d read %d times, partitions %v of the primary table, want one query of each of %v", step, reads.total(), got, want)
		}
	}
	got := received(sub)
	if len(got) != 6 {
		t.Fatalf("fed %v, want the 3 new images of each watched camera", got)
	}
}

// blocker holds back the first read by method of one table once armed,
// closing entered, until release is closed.
type blocker struct {
	table, method    string
	armed            atomic.Bool
	entered, release chan struct{}
}

func (b *blocker) hold(table, method string) {
	if table == b.table && method == b.method && b.armed.CompareAndSwap(true, false) {
		close(b.entered)
		<-b.release
	}
}

// blockingBackend holds back the read its blocker names.
type blockingBackend struct {
	store.Backend
	b *blocker
}

func (b blockingBackend) Table(ctx context.Context, name string) (store.Table, error) {
	t, err := b.Backend.Table(ctx, name)
	if err != nil {
		return nil, err
	}
	return blockingTable{Table: t, b: b.b}, nil
}

type blockingTable struct {
	store.Table
	b *blocker
}

func (t blockingTable) Query(ctx context.Context, q store.Query) (store.Page, error) {
	t.b.hold(t.Name(), "Query")
	return t.Table.Query(ctx, q)
}

func (t blockingTable) Scan(ctx context.Context, s store.Scan) (store.Page, error) {
	t.b.hold(t.Name(), "Scan")
	return t.Table.Scan(ctx, s)
}

// TestPassReadsOutsideTheLock: while a pass waits for the store, the feed's
// lock is free, so subscriptions come and go and creates publish; and what
// the pass read of a camera watched anew meanwhile is not fed to the new
// watch, which read for itself what existed when it began.
func TestPassReadsOutsideTheLock(t *testing.T) {
	for _, mode := range tailModes {
		t.Run(mode.name, func(t *testing.T) {
			block := &blocker{table: primaryName, method: "Query", entered: make(chan struct{}), release: make(chan struct{})}
			if mode.scans {
				block.table, block.method = indexName, "Scan"
			}
			f, repo, _ := newFeedSharded(t, blockingBackend{Backend: plainBackend{openDB(t)}, b: block}, Options{Poll: time.Second}, 1)
			first := subscribe(t, f, append([]string{"cam-a"}, mode.idle...)...)
			create(t, repo, "cam-a", now) // new to the first watch
			block.armed.Store(true)
			passed := make(chan error, 1)
			go func() { passed <- f.tail.pass(t.Context()) }()
			<-block.entered
			if !f.mu.TryLock() {
				t.Fatal("the feed's lock is held while a pass reads the store")
			}
			f.mu.Unlock()
			first.Close()
			second := subscribe(t, f, append([]string{"cam-a"}, mode.idle...)...)
			close(block.release)
			if err := <-passed; err != nil {
				t.Fatal(err)
			}
			if got := received(second); len(got) != 0 {
				t.Fatalf("a watch begun after the image was readable got %v from a pass that began before it", got)
			}
		})
	}
}

// TestSinceReadsOnlyTheCallersCameras: a resume of a few cameras, however
// old its stamp, queries their primary partitions and nothing else; one of
// many cameras scans the index only when its stamp is recent.
func TestSinceReadsOnlyTheCallersCameras(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cameras int
		age     time.Duration
		scans   bool
	}{
		{"few cameras", 3, 50 * time.Minute, false},
		// 13 index partitions: from the stamp less 6 minutes to 5 ahead.
		{"many cameras, recent", 40, time.Minute, true},
		{"many cameras, old", 40, 30 * time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reads := &readCounts{}
			f, repo, _ := newFeedSharded(t, countingBackend{Backend: openDB(t), counts: reads}, Options{}, 1)
			cameras := make(map[string]bool)
			for c := range tc.cameras {
				cameras["cam-"+strconv.Itoa(c)] = true
			}
			for c := range tc.cameras + 5 {
				for i := range 3 {
					create(t, repo, "cam-"+strconv.Itoa(c), now.Add(-tc.age+time.Duration(i)*time.Second))
				}
			}
			reads.reset()
			got := make(map[string][]time.Time)
			if err := f.Since(t.Context(), cameras, now.Add(-tc.age), func(img images.Image) error {
				got[img.CameraID] = append(got[img.CameraID], img.CapturedAt)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.cameras {
				t.Fatalf("images of %d cameras, want %d", len(got), tc.cameras)
			}
			for camera, times := range got {
				if !cameras[camera] || len(times) != 3 || !slices.IsSortedFunc(times, time.Time.Compare) {
					t.Fatalf("%s: %v, want its 3 images in capture order", camera, times)
				}
			}
			if scanned := reads.scans(indexName) > 0; scanned != tc.scans {
				t.Fatalf("scanned the index: %v, want %v", scanned, tc.scans)
			}
			if !tc.scans && len(reads.partitions(primaryName)) != tc.cameras {
				t.Fatalf("queried %d partitions for %d cameras", len(reads.partitions(primaryName)), tc.cameras)
			}
		})
	}
}

// TestIndexTailGivesUpAPrimaryRowThatNeverLands: an index scan reads the
// primary row of an index row without one at each pass only for the index
// lag (and a poll): by then the create gave up, and later passes leave it.
func TestIndexTailGivesUpAPrimaryRowThatNeverLands(t *testing.T) {
	reads := &readCounts{}
	f, repo, clock := newFeedSharded(t, countingBackend{Backend: plainBackend{openDB(t)}, counts: reads}, Options{Poll: time.Second}, 1)
	subscribe(t, f, append([]string{"cam-a"}, idleCameras(11)...)...)
	_, index := repo.Tables()
	rowKey := store.InvertedTicksRowKey(now)
	if _, err := index.Upsert(t.Context(), store.Entity{
		PartitionKey: images.IndexPartitionKey(now, "cam-a", 1), RowKey: images.IndexRowKey(rowKey, "cam-a"),
		Properties: store.Properties{images.PropDeviceID: "cam-a", images.PropMetadataRowKey: rowKey},
	}, store.Replace); err != nil {
		t.Fatal(err)
	}
	gets := func(at time.Duration) int {
		t.Helper()
		*clock = now.Add(at)
		reads.reset()
		if err := f.tail.pass(t.Context()); err != nil {
			t.Fatal(err)
		}
		reads.mu.Lock()
		defer reads.mu.Unlock()
		return reads.calls[primaryName]["Get"]
	}
	// The index lag is 2 seconds here, the poll 1.
	for _, step := range []struct {
		at   time.Duration
		gets int
	}{{0, 1}, {2 * time.Second, 1}, {4 * time.Second, 1}, {5 * time.Second, 0}, {6 * time.Second, 0}} {
		if n := gets(step.at); n != step.gets {
			t.Fatalf("pass at +%s read the primary row %d times, want %d", step.at, n, step.gets)
		}
	}
}
