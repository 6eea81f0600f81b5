package aztable_test

import (
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metadatad/metadatad/internal/azurite"
	"github.com/metadatad/metadatad/internal/syncbuf"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/aztable"
)

// TestClockFallbacksAreLoggedAndCounted: a write whose answer's ETag
// carries no time (as Cosmos DB's do not) takes the Date header's, and one
// without a Date header this process's clock; each cause is logged once
// and every fallback counted.
func TestClockFallbacksAreLoggedAndCounted(t *testing.T) {
	conn := azurite.Require(t)
	// stripDate is whether answers lose their Date header too.
	var mu sync.Mutex
	stripDate := false
	opaque := transportFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil || req.Method == http.MethodGet || resp.Header.Get("ETag") == "" {
			return resp, err
		}
		resp.Header.Set("ETag", `W/"`+strconv.Itoa(rand.Int())+`"`)
		mu.Lock()
		defer mu.Unlock()
		if stripDate {
			resp.Header.Del("Date")
		}
		return resp, nil
	})
	logs := &syncbuf.Buffer{}
	prefix := "t" + strings.ToLower(strconv.FormatUint(rand.Uint64(), 36))[:10]
	b, err := aztable.Open(t.Context(), aztable.Options{ConnectionString: conn, TablePrefix: prefix, Retry: fastRetry,
		Transport: opaque, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteTables(t, conn, prefix) })
	tbl, err := b.Table(t.Context(), "Clock")
	if err != nil {
		t.Fatal(err)
	}
	write := func(i int) store.Entity {
		t.Helper()
		e, err := tbl.Upsert(t.Context(), store.Entity{PartitionKey: "p", RowKey: strconv.Itoa(i)}, store.Replace)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	before := time.Now().Add(-time.Minute)
	for i := range 3 {
		if e := write(i); e.Timestamp.Before(before) || e.Timestamp.Nanosecond() != 0 {
			t.Fatalf("Timestamp %s: want the Date header's, to the second", e.Timestamp)
		}
	}
	mu.Lock()
	stripDate = true
	mu.Unlock()
	for i := range 2 {
		write(10 + i)
	}
	if date, local := b.ClockFallbacks(); date != 3 || local != 2 {
		t.Errorf("fallbacks: %d to the Date header, %d to the local clock; want 3 and 2", date, local)
	}
	out := logs.String()
	if n := strings.Count(out, "source=date"); n != 1 {
		t.Errorf("logged the Date fallback %d times, want once:\n%s", n, out)
	}
	if n := strings.Count(out, "source=local"); n != 1 {
		t.Errorf("logged the local fallback %d times, want once:\n%s", n, out)
	}
}

// TestNoClockFallbackWithAzureETags: Azure's own ETags carry the time.
func TestNoClockFallbackWithAzureETags(t *testing.T) {
	b := open(t, nil)
	tbl, err := b.Table(t.Context(), "Clock")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Upsert(t.Context(), store.Entity{PartitionKey: "p", RowKey: "r"}, store.Replace); err != nil {
		t.Fatal(err)
	}
	if date, local := b.ClockFallbacks(); date != 0 || local != 0 {
		t.Errorf("fallbacks %d, %d against Azurite; want none", date, local)
	}
}
