package faultproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/netutil"
)

// defaultMaxConns is Options.MaxConns when zero: far more than a test's
// client keeps open (azcore's keeps 10 idle connections per host).
const defaultMaxConns = 64

// Fault is what the proxy does to one request.
type Fault int

// The faults.
const (
	// None forwards the request and relays the answer.
	None Fault = iota
	// Busy answers 503 Server Busy without forwarding the request, as Azure
	// Storage does when it throttles.
	Busy
	// Timeout answers 500 Operation Timeout without forwarding the request.
	Timeout
	// DropRequest closes the connection without forwarding the request, as
	// when the request is lost on its way.
	DropRequest
	// DropResponse forwards the request, waits for the target's whole answer
	// and closes the connection instead of relaying it: the request took
	// effect, and the client cannot know.
	DropResponse
)

// Faults are the faults injected when Options.Faults is empty, in the order
// Options.Every takes them.
var Faults = []Fault{Busy, Timeout, DropRequest, DropResponse}

// String names the fault.
func (f Fault) String() string {
	switch f {
	case None:
		return "none"
	case Busy:
		return "busy"
	case Timeout:
		return "timeout"
	case DropRequest:
		return "drop-request"
	case DropResponse:
		return "drop-response"
	}
	return "fault(" + strconv.Itoa(int(f)) + ")"
}

// Options configures Start.
type Options struct {
	// Target is the base URL of the service, such as http://127.0.0.1:10002;
	// a request's path and query are appended to it. Required.
	Target string
	// Every, when above zero, faults every Every-th request (the Every-th,
	// the 2×Every-th, ...), taking Faults in turn.
	Every int
	// Rate, when Every is zero, is the probability that a request is
	// faulted, from 0 to 1; the fault is drawn evenly from Faults. The draws
	// come from a generator seeded with Seed, in the order requests arrive.
	Rate float64
	// Seed seeds the draws of Rate.
	Seed uint64
	// Faults are the faults injected; empty means all of them.
	Faults []Fault
	// MaxConns bounds the client connections served at once, and so the
	// proxy's goroutines, and the connections to the target; 0 means 64. A
	// client beyond it waits to be accepted.
	MaxConns int
}

// Counts are what the proxy did since it started.
type Counts struct {
	// Requests counts the requests received.
	Requests int64
	// Forwarded counts the requests the target answered, the answers the
	// proxy dropped included.
	Forwarded int64
	// Busy, Timeout and DropRequest count those faults.
	Busy, Timeout, DropRequest int64
	// DropResponse counts the target's answers dropped; a request whose
	// forwarding failed, which the target may not have seen, is not counted.
	DropResponse int64
}

// Injected is the count of one fault.
func (c Counts) Injected(f Fault) int64 {
	switch f {
	case Busy:
		return c.Busy
	case Timeout:
		return c.Timeout
	case DropRequest:
		return c.DropRequest
	case DropResponse:
		return c.DropResponse
	}
	return 0
}

// Proxy is a running fault-injecting proxy. Its methods are safe for
// concurrent use.
type Proxy struct {
	opts      Options
	url       string
	server    *http.Server
	transport *http.Transport
	forward   *httputil.ReverseProxy
	// cancel ends the contexts of the requests in flight, and so their
	// forwarding, when the proxy closes.
	cancel context.CancelFunc
	// served is closed when the server's accept loop has returned.
	served chan struct{}

	mu     sync.Mutex
	closed bool
	rng    *rand.Rand
	counts Counts
	// handlers are the requests admitted and not yet finished; Close waits
	// for them. Requests are only admitted before closed is set.
	handlers sync.WaitGroup
}

// Start listens on a free loopback port and proxies to opts.Target.
func Start(opts Options) (*Proxy, error) {
	target, err := url.Parse(opts.Target)
	if err != nil || target.Scheme == "" || target.Host == "" {
		return nil, fmt.Errorf("faultproxy: target %q is not an absolute URL", opts.Target)
	}
	if opts.Every < 0 || opts.Rate < 0 || opts.Rate > 1 {
		return nil, fmt.Errorf("faultproxy: Every %d must not be negative and Rate %g must lie in [0, 1]", opts.Every, opts.Rate)
	}
	if len(opts.Faults) == 0 {
		opts.Faults = Faults
	}
	opts.Faults = slices.Clone(opts.Faults)
	for _, f := range opts.Faults {
		if !slices.Contains(Faults, f) {
			return nil, fmt.Errorf("faultproxy: %s is not a fault to inject", f)
		}
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = defaultMaxConns
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		opts:   opts,
		url:    "http://" + l.Addr().String(),
		cancel: cancel,
		served: make(chan struct{}),
		rng:    rand.New(rand.NewPCG(opts.Seed, opts.Seed)),
	}
	p.transport = &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxConnsPerHost:     opts.MaxConns,
		MaxIdleConnsPerHost: opts.MaxConns,
		IdleConnTimeout:     90 * time.Second,
	}
	p.forward = &httputil.ReverseProxy{
		// SetURL also sets the Host header to the target's; no
		// X-Forwarded-* headers are added, so the request the target sees
		// is the client's, signatures included.
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: p.transport,
		ModifyResponse: func(*http.Response) error {
			p.mu.Lock()
			p.counts.Forwarded++
			p.mu.Unlock()
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			if d, ok := w.(*discard); ok {
				d.err = err
				return
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	p.server = &http.Server{
		Handler:           http.HandlerFunc(p.serve),
		ReadHeaderTimeout: 10 * time.Second,
		// Longer than the clients' idle timeout (90s in azcore and
		// net/http), so that the client, not the proxy, ends idle
		// connections and no request races a closing one.
		IdleTimeout: 2 * time.Minute,
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	go func() {
		defer close(p.served)
		_ = p.server.Serve(netutil.LimitListener(l, opts.MaxConns))
	}()
	return p, nil
}

// URL is the proxy's base URL, such as http://127.0.0.1:40123.
func (p *Proxy) URL() string { return p.url }

// Counts returns what the proxy did so far.
func (p *Proxy) Counts() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts
}

// Close stops the proxy: it stops accepting, closes every connection,
// cancels the forwarding in flight and returns once every request has
// finished. Closing twice does nothing.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	// Connections close first, so that a request in flight is dropped
	// rather than answered 502 by a forwarding cut short.
	err := p.server.Close()
	p.cancel()
	<-p.served
	p.handlers.Wait()
	p.transport.CloseIdleConnections()
	return err
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	fault, n, ok := p.admit()
	if !ok {
		hangUp(w) // closing
		return
	}
	defer p.handlers.Done()
	switch fault {
	case Busy:
		refuse(w, r, n, http.StatusServiceUnavailable, "ServerBusy", "The server is busy.")
	case Timeout:
		refuse(w, r, n, http.StatusInternalServerError, "OperationTimedOut", "Operation could not be completed within the specified time.")
	case DropRequest:
		hangUp(w)
	case DropResponse:
		d := &discard{header: http.Header{}}
		p.forward.ServeHTTP(d, r)
		if d.err == nil {
			p.mu.Lock()
			p.counts.DropResponse++
			p.mu.Unlock()
		}
		hangUp(w)
	default:
		p.forward.ServeHTTP(w, r)
	}
}

// admit counts a request and decides its fault, or reports that the proxy
// is closing. The request's number is its place in the order of arrival.
func (p *Proxy) admit() (fault Fault, n int64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return None, 0, false
	}
	p.handlers.Add(1)
	p.counts.Requests++
	n = p.counts.Requests
	fault = p.decide(n)
	switch fault {
	case Busy:
		p.counts.Busy++
	case Timeout:
		p.counts.Timeout++
	case DropRequest:
		p.counts.DropRequest++
	}
	return fault, n, true
}

// decide is the policy: the fault of the n-th request.
func (p *Proxy) decide(n int64) Fault {
	faults := p.opts.Faults
	switch {
	case p.opts.Every > 0:
		every := int64(p.opts.Every)
		if n%every != 0 {
			return None
		}
		return faults[(n/every-1)%int64(len(faults))]
	case p.opts.Rate > 0 && p.rng.Float64() < p.opts.Rate:
		return faults[p.rng.IntN(len(faults))]
	}
	return None
}

// refuse answers as Azure Storage does when it throttles or times out: the
// code in x-ms-error-code and in the body, which is an OData error in JSON
// for a client that accepts JSON (the table service) and XML otherwise (the
// queue and blob services).
func refuse(w http.ResponseWriter, r *http.Request, n int64, status int, code, message string) {
	requestID := fmt.Sprintf("00000000-0000-0000-0000-%012d", n)
	message += "\nRequestId:" + requestID + "\nTime:" + time.Now().UTC().Format("2006-01-02T15:04:05.0000000Z")
	var body []byte
	contentType := "application/xml"
	if strings.Contains(r.Header.Get("Accept"), "json") {
		contentType = "application/json;odata=minimalmetadata;streaming=true;charset=utf-8"
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message struct {
					Lang  string `json:"lang"`
					Value string `json:"value"`
				} `json:"message"`
			} `json:"odata.error"`
		}
		e.Error.Code, e.Error.Message.Lang, e.Error.Message.Value = code, "en-US", message
		body, _ = json.Marshal(e)
	} else {
		var b bytes.Buffer
		b.WriteString(xml.Header)
		_ = xml.NewEncoder(&b).Encode(struct {
			XMLName xml.Name `xml:"Error"`
			Code    string   `xml:"Code"`
			Message string   `xml:"Message"`
		}{Code: code, Message: message})
		body = b.Bytes()
	}
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("x-ms-error-code", code)
	h.Set("x-ms-request-id", requestID)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// hangUp closes the client's connection without an answer.
func hangUp(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Returning would send an empty 200 OK. A connection that cannot be
		// taken over (an HTTP/2 stream) is reset by aborting the handler.
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

// discard is the ResponseWriter of an answer the proxy drops: it takes the
// whole answer, so that the target finishes the request, and keeps nothing
// but the error of a forwarding that failed.
type discard struct {
	header http.Header
	err    error
}

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}
