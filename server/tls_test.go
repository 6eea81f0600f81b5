package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/internal/testcerts"
	"github.com/metadatad/metadatad/internal/testwait"
	"github.com/metadatad/metadatad/server"
	"github.com/metadatad/metadatad/server/auth"
	"github.com/metadatad/metadatad/server/tlscreds"
)

// writeFiles writes name -> content into dir.
func writeFiles(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, content := range files {
		// Write and rename, as a file is replaced in place, never seen half written.
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, content, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// clientTLS is a client's TLS credentials trusting ca, presenting the
// certificate certPEM/keyPEM if given.
func clientTLS(t *testing.T, ca *testcerts.Authority, certPEM, keyPEM []byte) credentials.TransportCredentials {
	t.Helper()
	return credentials.NewTLS(ca.ClientConfig(t, certPEM, keyPEM))
}

// tlsServer serves with the certificate files in dir: server.crt,
// server.key and, for mutual TLS, clients.crt.
func tlsServer(t *testing.T, dir string, mutual bool, o serverOpts) *harness {
	t.Helper()
	opts := tlscreds.Options{CertFile: filepath.Join(dir, "server.crt"), KeyFile: filepath.Join(dir, "server.key"), RefreshInterval: 20 * time.Millisecond}
	if mutual {
		opts.ClientCAFile = filepath.Join(dir, "clients.crt")
	}
	creds, err := tlscreds.New(opts)
	if err != nil {
		t.Fatalf("tlscreds.New: %v", err)
	}
	t.Cleanup(creds.Close)
	o.creds = creds
	o.runPurges = true
	return startServerOpts(t, openMemPebble(t), o)
}

// servedCertificate is the common name of the certificate conn is served,
// or the error of a health check on it.
func servedCertificate(t *testing.T, conn *grpc.ClientConn) (string, error) {
	t.Helper()
	var p peer.Peer
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p), grpc.WaitForReady(false)); err != nil {
		return "", err
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		t.Fatalf("peer auth info %T, want TLS", p.AuthInfo)
	}
	return info.State.PeerCertificates[0].Subject.CommonName, nil
}

func TestTLS(t *testing.T) {
	ca := testcerts.NewAuthority(t, "server CA")
	dir := t.TempDir()
	crt, key := ca.Server(t, "first")
	writeFiles(t, dir, map[string][]byte{"server.crt": crt, "server.key": key})
	// Connections are aged quickly, so that one dialled before a rotation
	// reconnects and sees it.
	h := tlsServer(t, dir, false, serverOpts{limits: server.Limits{MaxConnectionAge: 200 * time.Millisecond}})
	early := h.dial(t, clientTLS(t, ca, nil, nil))

	if cn, err := servedCertificate(t, h.dial(t, clientTLS(t, ca, nil, nil))); err != nil || cn != "first" {
		t.Fatalf("TLS health check: %q, %v", cn, err)
	}
	if _, err := servedCertificate(t, h.dial(t, insecure.NewCredentials())); status.Code(err) != codes.Unavailable {
		t.Errorf("plaintext client: %v, want UNAVAILABLE", err)
	}

	t.Run("rotation", func(t *testing.T) {
		// A renewed certificate and key replace the files while the server
		// runs; new connections are served the new one, and an older
		// connection reaches its age and reconnects to see it too.
		if cn, err := servedCertificate(t, early); err != nil || cn != "first" {
			t.Fatalf("before the rotation: %q, %v", cn, err)
		}
		crt, key := ca.Server(t, "second")
		writeFiles(t, dir, map[string][]byte{"server.crt": crt, "server.key": key})
		for name, conn := range map[string]func() *grpc.ClientConn{
			"new connections":          func() *grpc.ClientConn { return h.dial(t, clientTLS(t, ca, nil, nil)) },
			"a connection from before": func() *grpc.ClientConn { return early },
		} {
			testwait.Until(t, 10*time.Second, func() error {
				cn, err := servedCertificate(t, conn())
				if err != nil {
					t.Fatalf("%s: health check during rotation: %v", name, err)
				}
				if cn != "second" {
					return fmt.Errorf("%s still see certificate %q after the rotation", name, cn)
				}
				return nil
			})
		}
	})
}

func TestMutualTLS(t *testing.T) {
	serverCA, clientCA, otherCA := testcerts.NewAuthority(t, "server CA"), testcerts.NewAuthority(t, "client CA"), testcerts.NewAuthority(t, "other CA")
	dir := t.TempDir()
	crt, key := serverCA.Server(t, "server")
	writeFiles(t, dir, map[string][]byte{"server.crt": crt, "server.key": key, "clients.crt": clientCA.PEM})
	tokens := filepath.Join(dir, "tokens")
	writeFiles(t, dir, map[string][]byte{"tokens": []byte(",spiffe://fleet.test/cron,retention.admin\n,spiffe://fleet.test/new,retention.admin\n")})
	a, err := auth.New(t.Context(), auth.Options{TokenFile: tokens, ClientCertificates: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h := tlsServer(t, dir, true, serverOpts{auth: a})

	listPurges := func(creds credentials.TransportCredentials) error {
		conn := h.dial(t, creds)
		_, err := metadatav1.NewRetentionServiceClient(conn).ListPurges(t.Context(), &metadatav1.ListPurgesRequest{})
		return err
	}
	cronCrt, cronKey := clientCA.Client(t, "cron", "spiffe://fleet.test/cron")
	requireOK(t, listPurges(clientTLS(t, serverCA, cronCrt, cronKey)), "ListPurges with a client certificate")
	if !strings.Contains(h.logs.String(), "principal=spiffe://fleet.test/cron ") {
		t.Errorf("the log does not name the certificate's principal:\n%s", h.logs.String())
	}
	nobodyCrt, nobodyKey := clientCA.Client(t, "nobody", "spiffe://fleet.test/nobody")
	requireCode(t, listPurges(clientTLS(t, serverCA, nobodyCrt, nobodyKey)), codes.PermissionDenied)
	requireCode(t, listPurges(clientTLS(t, serverCA, nil, nil)), codes.Unavailable)
	otherCrt, otherKey := otherCA.Client(t, "cron", "spiffe://fleet.test/cron")
	requireCode(t, listPurges(clientTLS(t, serverCA, otherCrt, otherKey)), codes.Unavailable)

	t.Run("client CA rotation", func(t *testing.T) {
		newCA := testcerts.NewAuthority(t, "new client CA")
		writeFiles(t, dir, map[string][]byte{"clients.crt": append(append([]byte{}, clientCA.PEM...), newCA.PEM...)})
		crt, key := newCA.Client(t, "new", "spiffe://fleet.test/new")
		testwait.Until(t, 10*time.Second, func() error {
			if err := listPurges(clientTLS(t, serverCA, crt, key)); err != nil {
				return fmt.Errorf("a certificate of the added CA still refused: %v", err)
			}
			return nil
		})
	})
}
