package retentiontest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/metadatad/metadatad/internal/azurite"
	"github.com/metadatad/metadatad/internal/faultproxy"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/azqueue"
	"github.com/metadatad/metadatad/store/aztable"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// faultRate is the share of requests to Azurite the proxies fail, each
// fault as likely as the others. One call exhausts faultRetry's 11 attempts
// with a chance of 0.2^11, about 2e-8, so the test does not flake on it.
const faultRate = 0.2

// faultRetry keeps the backoff short, so that a run with hundreds of faults
// stays quick.
var faultRetry = policy.RetryOptions{MaxRetries: 10, RetryDelay: 2 * time.Millisecond, MaxRetryDelay: 50 * time.Millisecond}

// faultSeeds seed each endpoint's proxy, so a run's faults repeat up to the
// order in which concurrent requests arrive.
var faultSeeds = map[string]uint64{"TableEndpoint": 1, "QueueEndpoint": 2}

// faultyAzure is an engine and image repositories on Azurite, reached
// through a fault proxy per endpoint, and a direct view of the same tables.
type faultyAzure struct {
	*Fixture
	// direct opens the same tables without the proxies, to check them by;
	// its engine never runs.
	direct       *Fixture
	table, queue *faultproxy.Proxy
	deletes      *deleteTargets
	// replays counts the writes aztable took as applied by an attempt whose
	// answer was lost.
	replays *atomic.Int64
}

func newFaultyAzure(t *testing.T, h Harness) *faultyAzure {
	t.Helper()
	conn := azurite.Require(t)
	proxied, proxies := throughFaultProxies(t, conn)
	var id [5]byte
	_, _ = rand.Read(id[:])
	name := hex.EncodeToString(id[:])
	opts := quickOptions()
	replays := new(atomic.Int64)
	backend, err := aztable.Open(t.Context(), aztable.Options{ConnectionString: proxied, TablePrefix: "t" + name,
		Logger: slog.New(replayCounter{replays}), Retry: faultRetry})
	if err != nil {
		t.Fatal(err)
	}
	q, err := azqueue.Open(t.Context(), azqueue.Options{ConnectionString: proxied, Name: "purge-" + name, Retry: faultRetry})
	if err != nil {
		t.Fatal(err)
	}
	directBackend, err := aztable.Open(t.Context(), aztable.Options{ConnectionString: conn, TablePrefix: "t" + name, Logger: opts.Logger})
	if err != nil {
		t.Fatal(err)
	}
	a := &faultyAzure{
		Fixture: &Fixture{Base: backend, Queue: q, Opts: opts, Harness: h},
		direct:  &Fixture{Base: directBackend, Opts: opts, Harness: h},
		table:   proxies["TableEndpoint"], queue: proxies["QueueEndpoint"],
		deletes: &deleteTargets{sent: map[string]map[store.Key]int{}},
		replays: replays,
	}
	a.OpenEngine(t, &HookedBackend{Backend: backend, Before: a.deletes.record})
	a.direct.OpenEngine(t, directBackend)
	return a
}

// throughFaultProxies starts a fault proxy in front of each of the table and
// queue endpoints of conn, and returns conn with the endpoints moved to them.
func throughFaultProxies(t *testing.T, conn string) (string, map[string]*faultproxy.Proxy) {
	t.Helper()
	proxies := map[string]*faultproxy.Proxy{}
	pairs := strings.Split(conn, ";")
	for i, pair := range pairs {
		name, value, _ := strings.Cut(pair, "=")
		seed, ok := faultSeeds[name]
		if !ok {
			continue
		}
		u, err := url.Parse(value)
		if err != nil {
			t.Fatalf("%s of the Azurite connection string: %v", name, err)
		}
		p, err := faultproxy.Start(faultproxy.Options{Target: u.Scheme + "://" + u.Host, Rate: faultRate, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		proxies[name] = p
		proxyURL, _ := url.Parse(p.URL())
		u.Scheme, u.Host = proxyURL.Scheme, proxyURL.Host
		pairs[i] = name + "=" + u.String()
	}
	if len(proxies) != len(faultSeeds) {
		t.Fatalf("the Azurite connection string lacks TableEndpoint or QueueEndpoint")
	}
	return strings.Join(pairs, ";"), proxies
}

// replayCounter is a log handler that counts aztable's messages of retried
// writes taken as applied ("a retried write found the table as it leaves
// it", store/aztable/replay.go) and drops the rest.
type replayCounter struct{ n *atomic.Int64 }

func (h replayCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h replayCounter) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "retried write") {
		h.n.Add(1)
	}
	return nil
}
func (h replayCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h replayCounter) WithGroup(string) slog.Handler      { return h }

// deleteTargets counts, per table and row, the deletes sent to the store.
type deleteTargets struct {
	mu   sync.Mutex
	sent map[string]map[store.Key]int
}

func (d *deleteTargets) record(table, op string, keys []store.Key) error {
	if op != "delete" && op != "batch-delete" {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sent[table] == nil {
		d.sent[table] = map[store.Key]int{}
	}
	for _, k := range keys {
		d.sent[table][k]++
	}
	return nil
}

// richImage is an image with every property of its kind set, distinct per
// image, so that a create that lost or mixed up properties shows.
func richImage(kind images.Kind, camera string, i int) images.Image {
	img := images.Image{
		CameraID:    camera,
		CapturedAt:  base.Add(time.Duration(i) * 20 * time.Second),
		BlobURI:     fmt.Sprintf("https://blobs.example/%s/%s/%02d.jpg", kind, camera, i),
		ContentType: "image/jpeg",
		SizeBytes:   int64(100_000 + i),
		Width:       1920,
		Height:      1080,
		Attributes:  map[string]string{"exposure": strconv.Itoa(i)},
	}
	switch kind {
	case images.Pano:
		img.IsClearDay = i%2 == 0
	case images.PreStitch:
		img.PanoImageCorrelationID = fmt.Sprintf("pano-%s-%02d", camera, i)
	}
	return img
}

// testCreatesAndPurgesSurviveFaults runs image creates and a purge of every
// kind on Azurite through proxies that fail a fifth of all requests to the
// table and queue services: throttled (503 Server Busy), timed out (500
// Operation Timeout, not applied), dropped before reaching Azurite, or
// dropped after Azurite applied them, whose retry then finds its own write
// done (an insert finds its row, a delete finds none, a conditional update
// finds its ETag moved on, a queue message is sent twice or its receipt
// dequeued and lost). Every create succeeds and nothing is lost; the purge
// succeeds with exact counts and leaves exactly the young rows.
//
// "Nothing deleted twice" is shown by exact counts, final contents and the
// deletes sent, not by requiring each row to be sent one delete: the queue
// delivers at least once (a send whose answer was dropped is retried, and
// both messages arrive), so two workers may legitimately send deletes for
// the same rows, and the second finds them gone (a batch dropping the
// missing row, or a retried batch taking it as applied); about one run in
// twenty-five does. A row cannot be removed twice while nothing writes it
// again, and nothing does during the purge. What would do harm is a removal
// counted twice, which the exact counts rule out (counts are fixed before
// the deletes, and index rows are counted with them), or a delete landing
// on a row it should not touch, which the deletes sent (expired rows only)
// and the final contents (every young row, its properties intact) rule out.
func testCreatesAndPurgesSurviveFaults(t *testing.T, ts *suite) {
	a := newFaultyAzure(t, ts.h)

	want := map[images.Kind][]images.Image{}
	for _, r := range a.Seeders(t) {
		for c := range cameras {
			for i := range expiredPerCamera + keptPerCamera {
				img, err := r.Create(t.Context(), richImage(r.Kind(), fmt.Sprintf("cam-%03d", c), i))
				if err != nil {
					t.Fatalf("create %s image %d of cam-%03d through faults: %v", r.Kind(), i, c, err)
				}
				want[r.Kind()] = append(want[r.Kind()], img)
			}
		}
	}
	a.LastCreate = a.Now()
	a.Settle()
	created := a.table.Counts()
	requireEveryFault(t, "table service, creating", created)
	// The creates run one at a time, so their faults fall on the same
	// requests in every run: some land on inserts whose answers are lost.
	replaysCreating := a.replays.Load()
	if replaysCreating == 0 {
		t.Errorf("no insert whose answer was lost was retried and taken as applied; the test missed its nastiest case")
	}
	checkStored(t, a.direct, want)

	a.Run(t)
	j := a.Purge(t, retention.StartRequest{Kinds: images.Kinds, Cutoff: cutoff})
	if j.State != retention.Succeeded {
		t.Fatalf("purge through faults: %s (%s)", j.State, j.Error)
	}
	for _, p := range j.Kinds {
		wantCountsAfterFaults(t, p.Kind.String(), p.Counts, expiredCounts(1))
	}
	boundary := j.Boundary()
	young := map[images.Kind][]images.Image{}
	for kind, imgs := range want {
		for _, img := range imgs {
			if !img.CapturedAt.Before(boundary) {
				young[kind] = append(young[kind], img)
			}
		}
	}
	checkStored(t, a.direct, young)
	checkDeletesSent(t, a, want, boundary)

	purged := a.table.Counts()
	requireEveryFault(t, "table service, purging", faultproxy.Counts{Busy: purged.Busy - created.Busy,
		Timeout: purged.Timeout - created.Timeout, DropRequest: purged.DropRequest - created.DropRequest,
		DropResponse: purged.DropResponse - created.DropResponse})
	requireEveryFault(t, "queue service", a.queue.Counts())
	t.Logf("table service: %+v after creates, %+v in all", created, purged)
	t.Logf("queue service: %+v", a.queue.Counts())
	t.Logf("retried writes taken as applied: %d while creating, %d while purging", replaysCreating, a.replays.Load()-replaysCreating)
}

// requireEveryFault fails the test unless each fault was injected: a run
// without some fault would pass without testing it.
func requireEveryFault(t *testing.T, what string, c faultproxy.Counts) {
	t.Helper()
	for _, f := range faultproxy.Faults {
		if c.Injected(f) == 0 {
			t.Errorf("%s: no %s fault was injected (%+v)", what, f, c)
		}
	}
}

// checkStored checks on the direct connection that each kind's tables hold
// exactly the images of want: each primary row with the properties it was
// created with, each index row pointing at its primary row, and no other row.
func checkStored(t *testing.T, direct *Fixture, want map[images.Kind][]images.Image) {
	t.Helper()
	for _, kind := range images.Kinds {
		r := direct.Repo(kind)
		primary, index := r.Tables()
		byCamera := map[string][]images.Image{}
		wantIndex := map[store.Key]store.Key{}
		for _, img := range want[kind] {
			byCamera[img.CameraID] = append(byCamera[img.CameraID], normalized(img))
			k := store.Key{PartitionKey: images.IndexPartitionKey(img.CapturedAt, img.CameraID, 0), RowKey: images.IndexRowKey(img.RowKey, img.CameraID)}
			wantIndex[k] = store.Key{PartitionKey: img.CameraID, RowKey: img.RowKey}
		}
		for camera, imgs := range byCamera {
			got, _, err := r.List(t.Context(), images.ListOptions{CameraID: camera, Limit: store.MaxPageSize})
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				got[i] = normalized(got[i])
			}
			slices.SortFunc(imgs, func(a, b images.Image) int { return strings.Compare(a.RowKey, b.RowKey) }) // newest first
			if !reflect.DeepEqual(got, imgs) {
				t.Errorf("%s images of %s:\n got %+v\nwant %+v", kind, camera, got, imgs)
			}
		}
		if n := len(rows(t, primary)); n != len(want[kind]) {
			t.Errorf("%s: %d primary rows, want %d", kind, n, len(want[kind]))
		}
		seen := map[store.Key]bool{}
		for _, e := range rows(t, index) {
			k := key(e)
			device, _ := e.Properties[images.PropDeviceID].(string)
			rowKey, _ := e.Properties[images.PropMetadataRowKey].(string)
			if w, ok := wantIndex[k]; !ok || seen[k] || w != (store.Key{PartitionKey: device, RowKey: rowKey}) {
				t.Errorf("%s: unexpected index row %s/%s -> %s/%s", kind, k.PartitionKey, k.RowKey, device, rowKey)
			}
			seen[k] = true
		}
		if len(seen) != len(wantIndex) {
			t.Errorf("%s: %d index rows, want %d", kind, len(seen), len(wantIndex))
		}
	}
}

// normalized is img with its capture time in UTC, for comparison.
func normalized(img images.Image) images.Image {
	img.CapturedAt = img.CapturedAt.UTC()
	return img
}

// checkDeletesSent checks that the purge sent deletes for every expired
// primary and index row and for no other row of the image tables, and logs
// how many rows were sent more than one delete.
func checkDeletesSent(t *testing.T, a *faultyAzure, created map[images.Kind][]images.Image, boundary time.Time) {
	t.Helper()
	a.deletes.mu.Lock()
	defer a.deletes.mu.Unlock()
	repeated := 0
	for _, kind := range images.Kinds {
		primary, index := a.direct.Repo(kind).Tables()
		expired := map[string]map[store.Key]bool{primary.Name(): {}, index.Name(): {}}
		// A worker may try an index row's key in the fleet's form too,
		// which no row has here: a delete that finds nothing.
		fleetForm := map[store.Key]bool{}
		for _, img := range created[kind] {
			if img.CapturedAt.Before(boundary) {
				expired[primary.Name()][store.Key{PartitionKey: img.CameraID, RowKey: img.RowKey}] = true
				expired[index.Name()][store.Key{PartitionKey: images.IndexPartitionKey(img.CapturedAt, img.CameraID, 0),
					RowKey: images.IndexRowKey(img.RowKey, img.CameraID)}] = true
				fleetForm[store.Key{PartitionKey: store.MinutePartitionKey(img.CapturedAt), RowKey: img.CameraID + "_" + img.RowKey}] = true
			}
		}
		for table, keys := range expired {
			for k, n := range a.deletes.sent[table] {
				if !keys[k] && !(table == index.Name() && fleetForm[k]) {
					t.Errorf("%s: a delete was sent for %s/%s, which is not expired", table, k.PartitionKey, k.RowKey)
				}
				if n > 1 {
					repeated++
				}
			}
			for k := range keys {
				if a.deletes.sent[table][k] == 0 {
					t.Errorf("%s: no delete was sent for expired row %s/%s", table, k.PartitionKey, k.RowKey)
				}
			}
		}
	}
	t.Logf("rows sent more than one delete: %d", repeated)
}
