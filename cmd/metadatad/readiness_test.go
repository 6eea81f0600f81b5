package main

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/metadatad/metadatad/internal/azurite"
	"github.com/metadatad/metadatad/server"
)

// switchableLink forwards TCP connections to a target until cut: then it
// drops every open connection and hangs up on new ones, as when the network
// to a storage account goes away, until restored.
type switchableLink struct {
	lis    net.Listener
	target string
	cut    atomic.Bool
	mu     sync.Mutex
	open   map[net.Conn]bool
}

func startLink(t *testing.T, target string) *switchableLink {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &switchableLink{lis: lis, target: target, open: map[net.Conn]bool{}}
	done := make(chan struct{})
	go l.serve(done)
	t.Cleanup(func() {
		_ = lis.Close()
		<-done
		l.dropAll()
	})
	return l
}

func (l *switchableLink) serve(done chan struct{}) {
	defer close(done)
	for {
		client, err := l.lis.Accept()
		if err != nil {
			return
		}
		if l.cut.Load() {
			_ = client.Close()
			continue
		}
		server, err := net.Dial("tcp", l.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		l.mu.Lock()
		l.open[client], l.open[server] = true, true
		l.mu.Unlock()
		go func() { _, _ = io.Copy(server, client); _ = server.Close() }()
		go func() { _, _ = io.Copy(client, server); _ = client.Close() }()
	}
}

func (l *switchableLink) dropAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.open {
		_ = c.Close()
	}
	clear(l.open)
}

func (l *switchableLink) setCut(cut bool) {
	l.cut.Store(cut)
	if cut {
		l.dropAll()
	}
}

var tableEndpoint = regexp.MustCompile(`TableEndpoint=http://([^/;]+)`)

// TestHealthFollowsTheStore runs the daemon on Azure Table Storage through
// a link the test cuts: health (the whole server, each service, writes)
// turns NOT_SERVING while the store cannot be reached and SERVING once it
// answers again, without a restart, as a readiness probe needs.
func TestHealthFollowsTheStore(t *testing.T) {
	conn := azurite.Require(t)
	m := tableEndpoint.FindStringSubmatch(conn)
	if m == nil {
		t.Fatalf("no table endpoint in %q", conn)
	}
	link := startLink(t, m[1])
	var id [4]byte
	_, _ = rand.Read(id[:])
	suffix := hex.EncodeToString(id[:])
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", tableEndpoint.ReplaceAllString(conn, "TableEndpoint=http://"+link.lis.Addr().String()))
	d := startDaemon(t, t.TempDir(), "-store", "azure", "-azure-table-prefix", "h"+suffix, "-purge-queue", "purge-"+suffix, "-health-interval", "200ms")

	services := []string{"", "metadata.v1.SingleImageMetadataService", server.WritesHealthService}
	all := func(want healthpb.HealthCheckResponse_ServingStatus) func() bool {
		return func() bool {
			for _, s := range services {
				if healthOf(t, d, s) != want {
					return false
				}
			}
			return true
		}
	}
	eventually(t, "SERVING with the store reachable", all(healthpb.HealthCheckResponse_SERVING))
	link.setCut(true)
	eventually(t, "NOT_SERVING with the store cut off", all(healthpb.HealthCheckResponse_NOT_SERVING))
	link.setCut(false)
	eventually(t, "SERVING again once the store answers", all(healthpb.HealthCheckResponse_SERVING))
	stop(t, d)
}
