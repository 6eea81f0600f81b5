package aztable_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/aztable"
)

// TestQueryFollowsContinuationTokens serves the answers Azure may give but
// Azurite never does: an empty page that still carries a continuation
// token, and a token with a NextPartitionKey but no NextRowKey. The query
// must pass the token back as it came and return every row.
func TestQueryFollowsContinuationTokens(t *testing.T) {
	const row = `{"odata.etag":"W/\"datetime'2026-01-01T00%3A00%3A00Z'\"","PartitionKey":"cam","RowKey":"%s","Timestamp":"2026-01-01T00:00:00Z","N":1}`
	var mu sync.Mutex
	var listed []string // the query strings of the list requests, in order
	transport := transportFunc(func(req *http.Request) (*http.Response, error) {
		answer := func(status int, body string, header http.Header) (*http.Response, error) {
			if header == nil {
				header = http.Header{}
			}
			header.Set("Content-Type", "application/json;odata=minimalmetadata")
			return &http.Response{StatusCode: status, Header: header, Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
		}
		switch {
		case req.Method == http.MethodGet && req.URL.Path == "/Tables":
			return answer(http.StatusOK, `{"value":[]}`, nil)
		case req.Method == http.MethodPost && req.URL.Path == "/Tables":
			return answer(http.StatusCreated, `{"TableName":"Things"}`, nil)
		case req.Method == http.MethodGet && strings.HasPrefix(req.URL.Path, "/Things()"):
			mu.Lock()
			listed = append(listed, req.URL.RawQuery)
			n := len(listed)
			mu.Unlock()
			switch n {
			case 1: // empty, with a partition-only token
				return answer(http.StatusOK, `{"value":[]}`, http.Header{"X-Ms-Continuation-Nextpartitionkey": {"1!8!Y2Ft"}})
			case 2: // one row, with a full token
				return answer(http.StatusOK, `{"value":[`+strings.Replace(row, "%s", "a", 1)+`]}`, http.Header{
					"X-Ms-Continuation-Nextpartitionkey": {"1!8!Y2Ft"}, "X-Ms-Continuation-Nextrowkey": {"1!4!Yg--"}})
			default: // the last row, no token
				return answer(http.StatusOK, `{"value":[`+strings.Replace(row, "%s", "b", 1)+`]}`, nil)
			}
		}
		t.Errorf("unexpected request %s %s", req.Method, req.URL)
		return answer(http.StatusNotFound, `{}`, nil)
	})
	b, err := aztable.Open(t.Context(), aztable.Options{
		ConnectionString: "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=c2VjcmV0;TableEndpoint=http://127.0.0.1:1/;",
		Retry:            policy.RetryOptions{MaxRetries: -1},
		Transport:        transport,
	})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := b.Table(t.Context(), "Things")
	if err != nil {
		t.Fatal(err)
	}
	page, err := tbl.Query(t.Context(), store.Query{PartitionKey: "cam"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entities) != 2 || page.Entities[0].RowKey != "a" || page.Entities[1].RowKey != "b" || page.Next != nil {
		t.Fatalf("page %+v; want rows a and b and no cursor", page)
	}
	if len(listed) != 3 {
		t.Fatalf("%d list requests, want 3: %q", len(listed), listed)
	}
	if !strings.Contains(listed[1], "NextPartitionKey=1%218%21Y2Ft") || strings.Contains(listed[1], "NextRowKey") {
		t.Errorf("second request %q: want the partition-only token passed back as it came", listed[1])
	}
	if !strings.Contains(listed[2], "NextRowKey=1%214%21Yg--") {
		t.Errorf("third request %q: want the full token passed back", listed[2])
	}
}
