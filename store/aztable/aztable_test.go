package aztable_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/metadatad/metadatad/internal/azurite"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/aztable"
	"github.com/metadatad/metadatad/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(azurite.Main(m)) }

// fastRetry keeps the tests' retries quick; the policy is the production one.
var fastRetry = policy.RetryOptions{RetryDelay: 10 * time.Millisecond, MaxRetryDelay: 100 * time.Millisecond}

// open opens a backend on Azurite under a fresh random table prefix, so that
// no test sees another's tables, and deletes its tables when the test ends.
func open(t *testing.T, transport policy.Transporter) *aztable.Backend {
	t.Helper()
	conn := azurite.Require(t)
	prefix := "t" + strings.ToLower(rand.Text()[:10])
	b, err := aztable.Open(t.Context(), aztable.Options{
		ConnectionString: conn,
		TablePrefix:      prefix,
		Retry:            fastRetry,
		Transport:        transport,
		Logger:           slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { deleteTables(t, conn, prefix) })
	return b
}

func deleteTables(t *testing.T, conn, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	service, err := aztables.NewServiceClientFromConnectionString(conn, nil)
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	// Table names compare case-insensitively; the prefix is lower case.
	filter := fmt.Sprintf("TableName ge '%s' and TableName lt '%s{'", prefix, prefix)
	pager := service.NewListTablesPager(&aztables.ListTablesOptions{Filter: &filter})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Errorf("cleanup: list tables: %v", err)
			return
		}
		for _, tbl := range page.Tables {
			if _, err := service.DeleteTable(ctx, *tbl.Name, nil); err != nil {
				t.Errorf("cleanup: delete table %s: %v", *tbl.Name, err)
			}
		}
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Backend { return open(t, nil) })
}

func TestOpenRejects(t *testing.T) {
	const key = "c2VjcmV0LWtleS1zZWNyZXQta2V5LXNlY3JldC1rZXk="
	for _, tc := range []struct {
		name string
		opts aztable.Options
		want string
	}{
		{"development storage shorthand", aztable.Options{ConnectionString: "UseDevelopmentStorage=true"}, "full connection string"},
		{"malformed connection string", aztable.Options{ConnectionString: "AccountKey=" + key + ";no pairs here"}, "malformed"},
		{"both connection string and URL", aztable.Options{ConnectionString: "AccountName=a;AccountKey=" + key, ServiceURL: "https://a.table.core.windows.net"}, "not both"},
		{"URL without credential", aztable.Options{ServiceURL: "https://a.table.core.windows.net"}, "Credential"},
		{"nothing", aztable.Options{}, "ConnectionString"},
		{"prefix with a dash", aztable.Options{ConnectionString: "AccountName=a;AccountKey=" + key, TablePrefix: "ci-1"}, "letters and digits"},
		{"prefix starting with a digit", aztable.Options{ConnectionString: "AccountName=a;AccountKey=" + key, TablePrefix: "1ci"}, "letters and digits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := aztable.Open(t.Context(), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: error %v, want one saying %q", err, tc.want)
			}
			if strings.Contains(err.Error(), key) {
				t.Errorf("Open: error %q quotes the account key", err)
			}
		})
	}
}

// TestSecretsNotInErrors checks that a transport failure, whose error quotes
// the request URL, does not carry a shared access signature into the error.
func TestSecretsNotInErrors(t *testing.T) {
	const sig = "SECRETSIGNATURE"
	refuse := transportFunc(func(req *http.Request) (*http.Response, error) {
		return nil, &url.Error{Op: req.Method, URL: req.URL.String(), Err: errors.New("connection refused")}
	})
	_, err := aztable.Open(t.Context(), aztable.Options{
		ConnectionString: "AccountName=acct;SharedAccessSignature=sv=2024-01-01&ss=t&sig=" + sig,
		Retry:            policy.RetryOptions{MaxRetries: -1},
		Transport:        refuse,
	})
	if err == nil {
		t.Fatal("Open through a refusing transport succeeded")
	}
	if strings.Contains(err.Error(), sig) {
		t.Errorf("Open: error %q quotes the signature", err)
	}
}

// TestLostAnswer drops the answer of a write the service applied, as a reset
// connection does: azcore retries, the retry fails as a replay does (409,
// 412, 404, a failed batch), and the write must recognise its own effect
// rather than report the sentinel. A write the table does not reflect keeps
// its error.
func TestLostAnswer(t *testing.T) {
	stored := store.Entity{PartitionKey: "cam1", RowKey: "stored", Properties: store.Properties{"Owner": "a"}}
	fresh := store.Entity{PartitionKey: "cam1", RowKey: "fresh", Properties: store.Properties{"BlobUri": "https://b/1"}}
	for _, tc := range []struct {
		name string
		// drop picks the request whose answer is lost.
		drop  func(*http.Request) bool
		write func(ctx context.Context, tbl store.Table, etag string) error
	}{
		{"Insert", isEntityInsert, func(ctx context.Context, tbl store.Table, _ string) error {
			_, err := tbl.Insert(ctx, fresh)
			return err
		}},
		{"Update with an ETag", methodIs(http.MethodPut), func(ctx context.Context, tbl store.Table, etag string) error {
			_, err := tbl.Update(ctx, store.Entity{PartitionKey: "cam1", RowKey: "stored", Properties: store.Properties{"Owner": "b"}}, store.Replace, etag)
			return err
		}},
		{"Update merging", methodIs(http.MethodPatch), func(ctx context.Context, tbl store.Table, etag string) error {
			_, err := tbl.Update(ctx, store.Entity{PartitionKey: "cam1", RowKey: "stored", Properties: store.Properties{"Extra": true}}, store.Merge, etag)
			return err
		}},
		{"Delete", methodIs(http.MethodDelete), func(ctx context.Context, tbl store.Table, _ string) error {
			return tbl.Delete(ctx, "cam1", "stored", "")
		}},
		{"Batch", isBatch, func(ctx context.Context, tbl store.Table, _ string) error {
			return tbl.Batch(ctx, []store.Op{
				{Kind: store.OpInsert, Entity: fresh},
				{Kind: store.OpDelete, Entity: stored},
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			faults := &faultTransport{fault: func(req *http.Request, n int) fault {
				if n == 0 && tc.drop(req) {
					return dropAnswer
				}
				return none
			}}
			tbl, err := open(t, faults).Table(t.Context(), "images")
			if err != nil {
				t.Fatal(err)
			}
			inserted, err := tbl.Insert(t.Context(), stored)
			if err != nil {
				t.Fatal(err)
			}
			faults.reset()
			if err := tc.write(t.Context(), tbl, inserted.ETag); err != nil {
				t.Fatalf("%s with a lost answer: %v", tc.name, err)
			}
			if faults.writes() < 2 {
				t.Fatalf("the write was sent %d times; the fault did not fire", faults.writes())
			}
		})
	}

	t.Run("InsertOfAnotherEntity", func(t *testing.T) {
		faults := &faultTransport{fault: func(req *http.Request, n int) fault {
			if n == 0 && isEntityInsert(req) {
				return serverBusy
			}
			return none
		}}
		tbl, err := open(t, faults).Table(t.Context(), "images")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tbl.Insert(t.Context(), stored); err != nil {
			t.Fatal(err)
		}
		faults.reset()
		other := stored
		other.Properties = store.Properties{"Owner": "other"}
		if _, err := tbl.Insert(t.Context(), other); !errors.Is(err, store.ErrAlreadyExists) {
			t.Errorf("retried Insert of a different entity under a taken key: %v, want ErrAlreadyExists", err)
		}
	})
}

// TestThrottling answers the first attempts of every request 503 Server Busy
// or 500 Operation Timeout, as Azure does under load: the retry policy must
// carry every operation through.
func TestThrottling(t *testing.T) {
	faults := &faultTransport{fault: func(req *http.Request, n int) fault {
		switch n {
		case 0:
			return serverBusy
		case 1:
			return operationTimeout
		}
		return none
	}}
	b := open(t, faults)
	tbl, err := b.Table(t.Context(), "images")
	if err != nil {
		t.Fatalf("Table: %v", err)
	}
	ctx := t.Context()
	e := store.Entity{PartitionKey: "cam1", RowKey: "r1", Properties: store.Properties{"N": int32(1)}}
	steps := []struct {
		name string
		do   func() error
	}{
		{"Insert", func() error { _, err := tbl.Insert(ctx, e); return err }},
		{"Upsert", func() error { _, err := tbl.Upsert(ctx, e, store.Merge); return err }},
		{"Get", func() error { _, err := tbl.Get(ctx, "cam1", "r1"); return err }},
		{"Query", func() error { _, err := tbl.Query(ctx, store.Query{PartitionKey: "cam1"}); return err }},
		{"Batch", func() error {
			return tbl.Batch(ctx, []store.Op{{Kind: store.OpInsert, Entity: store.Entity{PartitionKey: "cam1", RowKey: "r2"}}})
		}},
		{"Delete", func() error { return tbl.Delete(ctx, "cam1", "r1", "") }},
	}
	for _, s := range steps {
		faults.reset()
		if err := s.do(); err != nil {
			t.Errorf("%s under throttling: %v", s.name, err)
		}
	}
}

// TestBatchKeysWithQuotes checks batch operations on keys holding single
// quotes, which the SDK writes into the operation's URL unescaped.
func TestBatchKeysWithQuotes(t *testing.T) {
	tbl, err := open(t, nil).Table(t.Context(), "quotes")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	pk := "cam 'one'"
	for _, rk := range []string{"it's", "'", "''"} {
		if _, err := tbl.Insert(ctx, store.Entity{PartitionKey: pk, RowKey: rk, Properties: store.Properties{"V": int32(1)}}); err != nil {
			t.Fatalf("Insert %q: %v", rk, err)
		}
	}
	err = tbl.Batch(ctx, []store.Op{
		{Kind: store.OpUpdate, Mode: store.Merge, Entity: store.Entity{PartitionKey: pk, RowKey: "it's", Properties: store.Properties{"W": true}}},
		{Kind: store.OpUpsert, Mode: store.Replace, Entity: store.Entity{PartitionKey: pk, RowKey: "new's", Properties: store.Properties{"V": int32(2)}}},
		{Kind: store.OpDelete, Entity: store.Entity{PartitionKey: pk, RowKey: "'"}},
		{Kind: store.OpUpdate, Mode: store.Replace, Entity: store.Entity{PartitionKey: pk, RowKey: "''", Properties: store.Properties{"V": int32(3)}}},
	})
	if err != nil {
		t.Fatalf("Batch: %v", err)
	}
	page, err := tbl.Query(ctx, store.Query{PartitionKey: pk})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]store.Properties{
		"''":    {"V": int32(3)},
		"it's":  {"V": int32(1), "W": true},
		"new's": {"V": int32(2)},
	}
	if len(page.Entities) != len(want) {
		t.Fatalf("after the batch: %d entities, want %d: %+v", len(page.Entities), len(want), page.Entities)
	}
	for _, e := range page.Entities {
		if e.PartitionKey != pk || !store.EqualProperties(e.Properties, want[e.RowKey]) {
			t.Errorf("after the batch: %q/%q = %v, want %v", e.PartitionKey, e.RowKey, e.Properties, want[e.RowKey])
		}
	}
}

// TestLongTableNamesStayDistinct checks that names shortened to fit the
// prefix stay apart and stay case-insensitive.
func TestLongTableNamesStayDistinct(t *testing.T) {
	b := open(t, nil)
	ctx := t.Context()
	long := "t" + strings.Repeat("a", 61)
	names := []string{long + "b", long + "c", strings.ToUpper(long + "b")}
	for i, name := range names[:2] {
		tbl, err := b.Table(ctx, name)
		if err != nil {
			t.Fatalf("Table(%q): %v", name, err)
		}
		if _, err := tbl.Insert(ctx, store.Entity{PartitionKey: "p", RowKey: "r", Properties: store.Properties{"I": int32(i)}}); err != nil {
			t.Fatalf("Insert into %q: %v", name, err)
		}
	}
	upper, err := b.Table(ctx, names[2])
	if err != nil {
		t.Fatal(err)
	}
	got, err := upper.Get(ctx, "p", "r")
	if err != nil || got.Properties["I"] != int32(0) {
		t.Errorf("Get through the upper-case name: %v, %v; want the first table's entity", got.Properties, err)
	}
}

// fault is what faultTransport does to one request.
type fault int

const (
	none fault = iota
	// serverBusy answers 503 Server Busy without sending the request.
	serverBusy
	// operationTimeout answers 500 Operation Timeout without sending it.
	operationTimeout
	// dropAnswer sends the request, then loses the answer as a reset
	// connection would.
	dropAnswer
)

// faultTransport sends requests to Azurite, injecting the faults that
// fault chooses for the n-th request of the current step (counted from 0).
type faultTransport struct {
	fault func(req *http.Request, n int) fault
	mu    sync.Mutex
	n     int
	sent  int
}

func (f *faultTransport) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n, f.sent = 0, 0
}

// writes is how many requests other than reads reached the service in this step.
func (f *faultTransport) writes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent
}

func (f *faultTransport) Do(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	n := f.n
	f.n++
	what := f.fault(req, n)
	if (what == none || what == dropAnswer) && req.Method != http.MethodGet {
		f.sent++
	}
	f.mu.Unlock()
	switch what {
	case serverBusy:
		return answer(req, http.StatusServiceUnavailable, "ServerBusy"), nil
	case operationTimeout:
		return answer(req, http.StatusInternalServerError, "OperationTimedOut"), nil
	case dropAnswer:
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return nil, &url.Error{Op: req.Method, URL: req.URL.String(), Err: errors.New("connection reset by peer")}
	}
	return http.DefaultTransport.RoundTrip(req)
}

func answer(req *http.Request, status int, code string) *http.Response {
	return &http.Response{
		StatusCode: status,
		Status:     fmt.Sprintf("%d %s", status, code),
		Header:     http.Header{"X-Ms-Error-Code": {code}},
		Body:       http.NoBody,
		Request:    req,
	}
}

// isEntityInsert reports whether req inserts an entity: a POST to a table,
// not to the table list or the batch endpoint.
func isEntityInsert(req *http.Request) bool {
	return req.Method == http.MethodPost && !strings.HasSuffix(req.URL.Path, "/Tables") && !isBatch(req)
}

func isBatch(req *http.Request) bool { return strings.HasSuffix(req.URL.Path, "$batch") }

func methodIs(method string) func(*http.Request) bool {
	return func(req *http.Request) bool { return req.Method == method }
}

type transportFunc func(*http.Request) (*http.Response, error)

func (f transportFunc) Do(req *http.Request) (*http.Response, error) { return f(req) }
