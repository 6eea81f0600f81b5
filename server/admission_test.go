package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/metadatad/metadatad/server/auth"
)

// echoMethod is the one method of the test service the admission tests call.
const echoMethod = "/admissiontest.Echo/Call"

// admissionServer serves a one-method service through the real
// interceptor chain, counting the guard's authentications, on a listener
// listeners whose connections come from the peer addresses the test names.
type admissionServer struct {
	srv *grpc.Server
	// authentications counts the calls that reached the guard.
	authentications atomic.Int64
	// hold, when not nil, keeps each call in its handler until closed.
	hold chan struct{}
	// entered receives a value when a call reaches its handler.
	entered chan struct{}
}

func startAdmissionServer(t *testing.T, limits Limits) *admissionServer {
	t.Helper()
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("good,reader,metadata.read\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	authn, err := auth.New(t.Context(), auth.Options{TokenFile: tokens, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s := &admissionServer{entered: make(chan struct{}, 16)}
	guard := auth.NewGuard(authn, map[string]string{echoMethod: auth.ScopeRead})
	counted := func(ctx context.Context) (context.Context, error) {
		s.authentications.Add(1)
		return guard.Authorize(ctx)
	}
	limits.fill()
	s.srv = grpc.NewServer(interceptorChain(callLog{log: slog.New(slog.DiscardHandler)}, counted, newCallLimits(limits))...)
	s.srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "admissiontest.Echo",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Call", Handler: func(_ any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			return interceptor(ctx, in, &grpc.UnaryServerInfo{FullMethod: echoMethod}, func(ctx context.Context, _ any) (any, error) {
				s.entered <- struct{}{}
				if s.hold != nil {
					<-s.hold
				}
				return &emptypb.Empty{}, nil
			})
		}}},
	}, struct{}{})
	t.Cleanup(s.srv.Stop)
	return s
}

// fromPeer is a listener whose connections say they come from remote.
type fromPeer struct {
	*bufconn.Listener
	remote net.Addr
}

func (l fromPeer) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return peerConn{Conn: c, remote: l.remote}, nil
}

// peerConn is a net.Conn that says it comes from another address.
type peerConn struct {
	net.Conn
	remote net.Addr
}

func (c peerConn) RemoteAddr() net.Addr { return c.remote }

// from dials the server as a client at ip, through a listener of its own
// that the server also serves.
func (s *admissionServer) from(t *testing.T, ip string) *grpc.ClientConn {
	t.Helper()
	lis := fromPeer{Listener: bufconn.Listen(1 << 20), remote: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}}
	go func() { _ = s.srv.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///"+ip, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// call makes one call with token on conn and returns its code.
func call(t *testing.T, conn *grpc.ClientConn, token string) codes.Code {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+token)
	return status.Code(conn.Invoke(ctx, echoMethod, &emptypb.Empty{}, &emptypb.Empty{}))
}

// TestBadTokenFloodRefusedBeforeAuthentication: a peer sending bad tokens
// is authenticated only as often as its budget of failed authentications
// (-rate-burst, refilled at -rate-limit) allows, then refused with
// RESOURCE_EXHAUSTED without its tokens being checked; a caller with a good
// token at another address is served meanwhile.
func TestBadTokenFloodRefusedBeforeAuthentication(t *testing.T) {
	s := startAdmissionServer(t, Limits{Rate: 0.001, Burst: 3})
	flooder := s.from(t, "198.51.100.7")
	got := map[codes.Code]int{}
	for range 50 {
		got[call(t, flooder, "forged")]++
	}
	if want := map[codes.Code]int{codes.Unauthenticated: 3, codes.ResourceExhausted: 47}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("50 bad-token calls from one peer: %v, want %v", got, want)
	}
	if n := s.authentications.Load(); n != 3 {
		t.Errorf("the guard authenticated %d of the flood's calls, want 3 (the burst)", n)
	}
	if code := call(t, s.from(t, "203.0.113.9"), "good"); code != codes.OK {
		t.Errorf("a good token from another address during the flood: %v", code)
	}
	if code := call(t, flooder, "good"); code != codes.ResourceExhausted {
		t.Errorf("a good token from the flooding address: %v, want RESOURCE_EXHAUSTED until its budget refills", code)
	}
}

// TestInFlightCapBeforeAuthentication: with every place in flight taken,
// calls are refused with RESOURCE_EXHAUSTED before the guard checks their
// tokens, good or bad.
func TestInFlightCapBeforeAuthentication(t *testing.T) {
	s := startAdmissionServer(t, Limits{MaxInFlight: 1})
	s.hold = make(chan struct{})
	conn := s.from(t, "198.51.100.7")
	held := make(chan codes.Code, 1)
	go func() { held <- call(t, conn, "good") }()
	<-s.entered
	for range 20 {
		if code := call(t, conn, "forged"); code != codes.ResourceExhausted {
			t.Fatalf("a bad-token call beyond the in-flight cap: %v, want RESOURCE_EXHAUSTED", code)
		}
	}
	if n := s.authentications.Load(); n != 1 {
		t.Errorf("the guard authenticated %d calls, want 1: calls beyond the cap must not reach it", n)
	}
	close(s.hold)
	if code := <-held; code != codes.OK {
		t.Fatalf("the held call: %v", code)
	}
	if code := call(t, conn, "forged"); code != codes.Unauthenticated {
		t.Errorf("a bad token once a place is free: %v, want UNAUTHENTICATED", code)
	}
}

// TestRateLimitersStayBounded: 200,000 principals calling once each, all
// within one instant, leave at most maxLimiters buckets behind; once their
// buckets have refilled, the next new caller's sweep forgets them all.
// The heap they hold is logged: about 300 bytes a bucket.
func TestRateLimitersStayBounded(t *testing.T) {
	const subjects = 200_000
	k := newKeyedLimiters(1, 10, maxLimiters)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	most := 0
	for i := range subjects {
		if !k.allow(fmt.Sprintf("subject-%06d", i), now) {
			t.Fatalf("subject %d refused its first call", i)
		}
		most = max(most, k.size())
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	t.Logf("%d subjects: at most %d buckets held, %d at the end, heap %+.1f MB", subjects, most, k.size(), (float64(after.HeapAlloc)-float64(before.HeapAlloc))/1e6)
	if most > maxLimiters {
		t.Errorf("%d buckets held at once, want at most %d", most, maxLimiters)
	}
	// A second's refill fills a bucket that lost one token of ten.
	if !k.allow("latecomer", now.Add(sweepEvery)) {
		t.Fatal("a new caller refused")
	}
	if n := k.size(); n != 1 {
		t.Errorf("%d buckets after every earlier one refilled, want the latecomer's alone", n)
	}
}

// TestLimitedCallerNotForgotten: a sweep forgets only full buckets, so a
// caller over its rate stays limited however many others come and go.
func TestLimitedCallerNotForgotten(t *testing.T) {
	k := newKeyedLimiters(0.0001, 2, 100) // no token back within the test's 1,000 s
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for range 2 {
		k.allow("greedy", now)
	}
	for i := range 1000 {
		now = now.Add(time.Second) // a sweep every minute, and one whenever 100 are held
		k.allow(fmt.Sprintf("passer-by-%d", i), now)
	}
	if k.allow("greedy", now) {
		t.Error("the caller over its rate was forgotten by a sweep")
	}
	if !k.exhausted("greedy", now) || k.exhausted("never-seen", now) {
		t.Error("exhausted does not tell an empty bucket from an unknown key")
	}
}

func TestPeerKey(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"198.51.100.7:50123", "198.51.100.7"},
		{"[2001:db8:1:2:aaaa::1]:443", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:bbbb::9]:80", "2001:db8:1:2::/64"},
		{"[::ffff:198.51.100.7]:1", "198.51.100.7"},
		{"bufconn", "bufconn"},
	} {
		addr := &net.TCPAddr{}
		var got string
		if host, port, err := net.SplitHostPort(tc.addr); err == nil {
			addr = &net.TCPAddr{IP: net.ParseIP(host)}
			fmt.Sscan(port, &addr.Port)
			got = peerKey(addr)
		} else {
			got = peerKey(fakeAddr(tc.addr))
		}
		if !strings.EqualFold(got, tc.want) {
			t.Errorf("peerKey(%s) = %s, want %s", tc.addr, got, tc.want)
		}
	}
}

// fakeAddr is an address whose String is not host:port, as bufconn's.
type fakeAddr string

func (a fakeAddr) Network() string { return "fake" }
func (a fakeAddr) String() string  { return string(a) }
