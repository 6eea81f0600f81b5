package faultproxy_test

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metadatad/metadatad/internal/faultproxy"
)

// target is a service that counts the requests it handled and echoes them.
type target struct {
	*httptest.Server
	handled atomic.Int64
}

func newTarget(t *testing.T) *target {
	t.Helper()
	tg := &target{}
	tg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		tg.handled.Add(1)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.RequestURI(), body)
	}))
	t.Cleanup(tg.Close)
	return tg
}

func start(t *testing.T, opts faultproxy.Options) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// client opens a connection per request: net/http silently resends a GET
// whose reused connection dropped, which would hide a fault from the test.
func client() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
}

// outcome is what a client saw of one request: "ok", "dropped", or the
// status and error code of a refusal.
func outcome(t *testing.T, c *http.Client, p *faultproxy.Proxy, accept string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.URL()+"/account/Tables?x=1", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := c.Do(req)
	if err != nil {
		return "dropped"
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK {
		if got := string(body); got != "POST /account/Tables?x=1 hello" {
			t.Fatalf("forwarded as %q", got)
		}
		return "ok"
	}
	code := resp.Header.Get("x-ms-error-code")
	if code == "" || resp.Header.Get("x-ms-request-id") == "" {
		t.Fatalf("%d without x-ms-error-code or x-ms-request-id: %v", resp.StatusCode, resp.Header)
	}
	// The body carries the code as well, in the format the client accepts.
	var inBody string
	if strings.Contains(accept, "json") {
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"odata.error"`
		}
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatalf("JSON error body %q: %v", body, err)
		}
		inBody = e.Error.Code
	} else {
		var e struct {
			Code string `xml:"Code"`
		}
		if err := xml.Unmarshal(body, &e); err != nil {
			t.Fatalf("XML error body %q: %v", body, err)
		}
		inBody = e.Code
	}
	if inBody != code {
		t.Fatalf("body names %q, header %q", inBody, code)
	}
	return fmt.Sprintf("%d %s", resp.StatusCode, code)
}

func TestEachFault(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fault  faultproxy.Fault
		accept string
		want   string
		// handled says whether the target saw the request.
		handled bool
	}{
		{"none", faultproxy.None, "application/xml", "ok", true},
		{"busy, table service", faultproxy.Busy, "application/json;odata=minimalmetadata", "503 ServerBusy", false},
		{"busy, queue service", faultproxy.Busy, "application/xml", "503 ServerBusy", false},
		{"timeout", faultproxy.Timeout, "application/json", "500 OperationTimedOut", false},
		{"drop request", faultproxy.DropRequest, "application/xml", "dropped", false},
		{"drop response", faultproxy.DropResponse, "application/xml", "dropped", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := newTarget(t)
			opts := faultproxy.Options{Target: tg.URL}
			if tc.fault != faultproxy.None {
				opts.Every, opts.Faults = 1, []faultproxy.Fault{tc.fault}
			}
			p := start(t, opts)
			if got := outcome(t, client(), p, tc.accept); got != tc.want {
				t.Fatalf("outcome %q, want %q", got, tc.want)
			}
			handled := tg.handled.Load() == 1
			if handled != tc.handled {
				t.Fatalf("target handled the request: %t, want %t", handled, tc.handled)
			}
			want := faultproxy.Counts{Requests: 1}
			if tc.handled {
				want.Forwarded = 1
			}
			switch tc.fault {
			case faultproxy.Busy:
				want.Busy = 1
			case faultproxy.Timeout:
				want.Timeout = 1
			case faultproxy.DropRequest:
				want.DropRequest = 1
			case faultproxy.DropResponse:
				want.DropResponse = 1
			}
			if got := p.Counts(); got != want {
				t.Fatalf("counts %+v, want %+v", got, want)
			}
			if tc.fault != faultproxy.None && p.Counts().Injected(tc.fault) != 1 {
				t.Fatalf("Injected(%s) = %d", tc.fault, p.Counts().Injected(tc.fault))
			}
		})
	}
}

func TestEveryTakesTheFaultsInTurn(t *testing.T) {
	p := start(t, faultproxy.Options{Target: newTarget(t).URL, Every: 2})
	var got []string
	for range 10 {
		got = append(got, outcome(t, client(), p, "application/xml"))
	}
	want := []string{"ok", "503 ServerBusy", "ok", "500 OperationTimedOut", "ok", "dropped", "ok", "dropped", "ok", "503 ServerBusy"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("outcomes %q, want %q", got, want)
	}
	if c := p.Counts(); c != (faultproxy.Counts{Requests: 10, Forwarded: 6, Busy: 2, Timeout: 1, DropRequest: 1, DropResponse: 1}) {
		t.Fatalf("counts %+v", c)
	}
}

func TestRateIsSeeded(t *testing.T) {
	run := func(rate float64, seed uint64) ([]string, faultproxy.Counts) {
		p := start(t, faultproxy.Options{Target: newTarget(t).URL, Rate: rate, Seed: seed})
		var got []string
		for range 60 {
			got = append(got, outcome(t, client(), p, "application/json"))
		}
		return got, p.Counts()
	}
	first, counts := run(0.5, 7)
	again, _ := run(0.5, 7)
	other, _ := run(0.5, 8)
	if fmt.Sprint(first) != fmt.Sprint(again) {
		t.Fatalf("seed 7 gave %q, then %q", first, again)
	}
	if fmt.Sprint(first) == fmt.Sprint(other) {
		t.Fatalf("seeds 7 and 8 gave the same faults %q", first)
	}
	for _, f := range faultproxy.Faults {
		if counts.Injected(f) == 0 {
			t.Errorf("60 requests at rate 0.5 injected no %s: %+v", f, counts)
		}
	}
	if none, c := run(0, 7); strings.Count(fmt.Sprint(none), "ok") != 60 {
		t.Fatalf("rate 0 faulted: %+v", c)
	}
}

// TestCloseEndsRequestsInFlight: Close cancels a request the target is
// still working on and returns; the proxy then refuses connections.
func TestCloseEndsRequestsInFlight(t *testing.T) {
	arrived := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
	}))
	defer slow.Close()
	p, err := faultproxy.Start(faultproxy.Options{Target: slow.URL})
	if err != nil {
		t.Fatal(err)
	}
	failed := make(chan error, 1)
	go func() {
		resp, err := client().Get(p.URL())
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("answered %s", resp.Status)
		}
		failed <- err
	}()
	<-arrived
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waiting after 10s")
	}
	if err := <-failed; strings.HasPrefix(err.Error(), "answered") {
		t.Fatalf("the request in flight: %v, want its connection dropped", err)
	}
	if _, err := client().Get(p.URL()); err == nil {
		t.Fatal("a closed proxy answered")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestMaxConnsBoundsConnections: clients beyond MaxConns wait, and are
// served once others finish.
func TestMaxConnsBoundsConnections(t *testing.T) {
	const maxConns, clients = 2, 5
	var mu sync.Mutex
	inFlight, most := 0, 0
	release := make(chan struct{})
	tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		<-release
		mu.Lock()
		inFlight--
		mu.Unlock()
	}))
	defer tg.Close()
	p := start(t, faultproxy.Options{Target: tg.URL, MaxConns: maxConns})
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		wg.Go(func() {
			resp, err := client().Get(p.URL())
			if err == nil {
				resp.Body.Close()
			}
			errs <- err
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := inFlight
		mu.Unlock()
		if n == maxConns {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests reached the target, want %d", n, maxConns)
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // room for a request past the bound to show up
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a waiting client failed: %v", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most != maxConns {
		t.Fatalf("%d requests at once reached the target, want at most %d", most, maxConns)
	}
}

func TestStartRejectsBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts faultproxy.Options
	}{
		{"no target", faultproxy.Options{}},
		{"relative target", faultproxy.Options{Target: "127.0.0.1:10002"}},
		{"negative every", faultproxy.Options{Target: "http://127.0.0.1:1", Every: -1}},
		{"rate above one", faultproxy.Options{Target: "http://127.0.0.1:1", Rate: 1.5}},
		{"none as a fault", faultproxy.Options{Target: "http://127.0.0.1:1", Every: 1, Faults: []faultproxy.Fault{faultproxy.None}}},
		{"unknown fault", faultproxy.Options{Target: "http://127.0.0.1:1", Every: 1, Faults: []faultproxy.Fault{9}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if p, err := faultproxy.Start(tc.opts); err == nil {
				p.Close()
				t.Fatal("started")
			}
		})
	}
}
