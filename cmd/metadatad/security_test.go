package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/internal/testcerts"
)

func TestSecurityFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"JWT without audience", []string{"-auth-jwks-url", "https://idp.test/keys", "-auth-issuer", "https://idp.test/"}, "-auth-audience"},
		{"two key sources", []string{"-auth-jwks-url", "https://idp.test/keys", "-auth-jwks-file", "k.json", "-auth-issuer", "i", "-auth-audience", "a"}, "not both"},
		{"reflection", []string{"-reflection", "public"}, "-reflection must be auth or open"},
		{"plaintext on all interfaces", []string{"-listen", ":50051"}, "refusing to serve plaintext on :50051"},
		{"plaintext on a public address", []string{"-listen", "10.0.0.7:50051"}, "-insecure"},
		{"cert without key", []string{"-tls-cert", "server.crt"}, "-tls-cert and -tls-key go together"},
		{"client CA without TLS", []string{"-tls-client-ca", "ca.crt"}, "-tls-client-ca needs -tls-cert"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parseConfig(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("parseConfig: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

func TestPlaintextAllowed(t *testing.T) {
	for _, args := range [][]string{
		{"-listen", "localhost:50051"},
		{"-listen", "127.0.0.1:0"},
		{"-listen", "[::1]:50051"},
		{"-listen", ":50051", "-insecure", "-auth-token-file", "tokens"},
		{"-listen", ":50051", "-tls-cert", "server.crt", "-tls-key", "server.key", "-auth-token-file", "tokens"},
	} {
		if _, err := parseConfig(args, io.Discard); err != nil {
			t.Errorf("parseConfig(%q): %v", args, err)
		}
	}
}

// TestUnauthenticatedOffLoopback: off loopback, TLS or -insecure alone do
// not make a server anyone may use: without authentication it refuses to
// start and names the fixes, unless -allow-unauthenticated says so.
func TestUnauthenticatedOffLoopback(t *testing.T) {
	tls := []string{"-tls-cert", "server.crt", "-tls-key", "server.key"}
	jwt := []string{"-auth-jwks-url", "https://idp.test/keys", "-auth-issuer", "https://idp.test/", "-auth-audience", "api://metadatad"}
	with := func(lists ...[]string) []string { return slices.Concat(lists...) }
	fixes := []string{"refusing to serve", "without authentication", "-auth-token-file", "-auth-jwks-url", "localhost", "-allow-unauthenticated"}
	for _, tc := range []struct {
		name string
		args []string
		// refused lists what the refusal must name; nil: the server starts.
		refused []string
	}{
		{"TLS", with([]string{"-listen", ":50051"}, tls), fixes},
		{"insecure", []string{"-listen", "10.0.0.7:50051", "-insecure"}, fixes},
		{"TLS and insecure", with([]string{"-listen", ":50051", "-insecure"}, tls), fixes},
		{"mutual TLS without a token file", with([]string{"-listen", ":50051", "-tls-client-ca", "ca.crt"}, tls), append(fixes, "empty token")},
		{"TLS, allowed", with([]string{"-listen", ":50051", "-allow-unauthenticated"}, tls), nil},
		{"insecure, allowed", []string{"-listen", "10.0.0.7:50051", "-insecure", "-allow-unauthenticated"}, nil},
		{"TLS and insecure, allowed", with([]string{"-listen", ":50051", "-insecure", "-allow-unauthenticated"}, tls), nil},
		{"TLS with tokens", with([]string{"-listen", ":50051", "-auth-token-file", "tokens"}, tls), nil},
		{"insecure with JWTs", with([]string{"-listen", ":50051", "-insecure"}, jwt), nil},
		{"loopback", []string{"-listen", "localhost:50051"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig(tc.args, io.Discard)
			switch {
			case tc.refused == nil && err != nil:
				t.Fatalf("parseConfig: %v, want the server to start", err)
			case tc.refused != nil && err == nil:
				t.Fatal("parseConfig accepted a server anyone may call everything on")
			}
			for _, fix := range tc.refused {
				if !strings.Contains(err.Error(), fix) {
					t.Errorf("the refusal %q does not name %s", err, fix)
				}
			}
		})
	}
}

// TestUnauthenticatedWarning: with -allow-unauthenticated the daemon warns
// at start, before it serves, and again every hour until it stops; with
// authentication, or without the flag on loopback, it does not.
func TestUnauthenticatedWarning(t *testing.T) {
	for _, tc := range []struct {
		name  string
		s     securityConfig
		warns int
	}{
		{"allowed", securityConfig{allowUnauthenticated: true}, 4},
		{"allowed with tokens", securityConfig{allowUnauthenticated: true, tokenFile: "tokens"}, 0},
		{"loopback", securityConfig{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logs strings.Builder
				log := slog.New(slog.NewTextHandler(&logs, nil))
				ctx, cancel := context.WithCancel(t.Context())
				tc.s.warnUnauthenticated(ctx, log, "10.0.0.7:50051")
				time.Sleep(3*time.Hour + time.Minute)
				synctest.Wait()
				cancel()
				if got := strings.Count(logs.String(), "serving without authentication"); got != tc.warns {
					t.Errorf("%d warnings in 3 hours, want %d:\n%s", got, tc.warns, logs.String())
				}
				if tc.warns > 0 && !strings.Contains(logs.String(), "level=WARN") {
					t.Errorf("not a warning: %s", logs.String())
				}
			})
		})
	}
	d := startDaemon(t, t.TempDir(), "-allow-unauthenticated")
	if !slices.ContainsFunc(d.startup, func(line string) bool { return strings.Contains(line, "serving without authentication") }) {
		t.Errorf("the daemon started with -allow-unauthenticated without warning:\n%s", strings.Join(d.startup, "\n"))
	}
	if _, err := d.client(t).GetLatestSingleImageMetadata(t.Context(), &metadatav1.GetLatestSingleImageMetadataRequest{CameraId: "cam-1"}); status.Code(err) != codes.NotFound {
		t.Errorf("an anonymous call: %v, want NOT_FOUND", err)
	}
}

// TestDaemonWithMutualTLS: the daemon serves TLS from -tls-cert and
// -tls-key, asks for client certificates from -tls-client-ca, and grants a
// certificate the scopes its token file line gives the certificate's identity.
func TestDaemonWithMutualTLS(t *testing.T) {
	dir := t.TempDir()
	serverCA, clientCA := testcerts.NewAuthority(t, "server CA"), testcerts.NewAuthority(t, "client CA")
	crt, key := serverCA.Server(t, "metadatad")
	files := map[string][]byte{
		"server.crt": crt, "server.key": key, "clients.crt": clientCA.PEM,
		"tokens": []byte(",spiffe://fleet.test/purger,retention.admin\n"),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d := startDaemon(t, t.TempDir(), "-tls-cert", filepath.Join(dir, "server.crt"), "-tls-key", filepath.Join(dir, "server.key"),
		"-tls-client-ca", filepath.Join(dir, "clients.crt"), "-auth-token-file", filepath.Join(dir, "tokens"),
		"-metrics-listen", "127.0.0.1:0")
	purge := func(cfg *tls.Config) error {
		conn, err := grpc.NewClient(d.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, err = metadatav1.NewRetentionServiceClient(conn).StartPurge(t.Context(),
			&metadatav1.StartPurgeRequest{Cutoff: &metadatav1.StartPurgeRequest_RetentionDays{RetentionDays: 30}, DryRun: true})
		return err
	}
	if err := purge(serverCA.ClientConfig(t, nil, nil)); status.Code(err) != codes.Unavailable {
		t.Errorf("without a client certificate: %v, want UNAVAILABLE", err)
	}
	other, otherKey := clientCA.Client(t, "other", "spiffe://fleet.test/other")
	if err := purge(serverCA.ClientConfig(t, other, otherKey)); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a certificate without retention.admin: %v, want PERMISSION_DENIED", err)
	}
	purger, purgerKey := clientCA.Client(t, "purger", "spiffe://fleet.test/purger")
	if err := purge(serverCA.ClientConfig(t, purger, purgerKey)); err != nil {
		t.Errorf("the purger's certificate: %v", err)
	}
	served, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(served.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	series := `metadatad_tls_certificate_expiry_timestamp_seconds{name="serving"}`
	if got := scrape(t, d.metricsAddr)[series]; got != float64(leaf.NotAfter.Unix()) {
		t.Errorf("%s = %v, want the served certificate's NotAfter %d", series, got, leaf.NotAfter.Unix())
	}
}

// TestDaemonWithTokenFile: with -auth-token-file, a purge needs a token
// holding retention.admin, and the daemon never logs the token.
func TestDaemonWithTokenFile(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("s3cret-purger,cron,retention.admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, t.TempDir(), "-auth-token-file", tokens)
	client := metadatav1.NewRetentionServiceClient(d.conn(t))
	purge := &metadatav1.StartPurgeRequest{Cutoff: &metadatav1.StartPurgeRequest_RetentionDays{RetentionDays: 30}}
	if _, err := client.StartPurge(t.Context(), purge); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("purge without a token: %v, want UNAUTHENTICATED", err)
	}
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer s3cret-purger")
	if _, err := client.StartPurge(ctx, purge); err != nil {
		t.Fatalf("purge with the token: %v", err)
	}
	var logs []string
	for len(logs) < 2 {
		logs = append(logs, <-d.logs)
		if strings.Contains(logs[len(logs)-1], "s3cret") {
			t.Fatalf("the daemon logged the token: %s", logs[len(logs)-1])
		}
	}
}

func TestLimitFlags(t *testing.T) {
	c, err := parseConfig([]string{"-max-request-bytes", "1024", "-rate-limit", "5", "-rate-burst", "10", "-max-in-flight", "7", "-max-watches", "2", "-max-feeds", "3", "-max-deleted-image-watches", "4", "-default-deadline", "5s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	l := c.limits.server()
	if l.MaxRequestBytes != 1024 || l.Rate != 5 || l.Burst != 10 || l.MaxInFlight != 7 || l.MaxWatches != 2 || l.MaxFeeds != 3 || l.MaxDeletedImageWatches != 4 || l.DefaultDeadline != 5*time.Second {
		t.Fatalf("limits %+v do not follow the flags", l)
	}
}
