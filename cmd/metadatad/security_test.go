package main

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
			if _, err := parseConfig(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
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
		{"-listen", ":50051", "-insecure"},
		{"-listen", ":50051", "-tls-cert", "server.crt", "-tls-key", "server.key"},
	} {
		if _, err := parseConfig(args); err != nil {
			t.Errorf("parseConfig(%q): %v", args, err)
		}
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
	c, err := parseConfig([]string{"-max-request-bytes", "1024", "-rate-limit", "5", "-rate-burst", "10", "-max-in-flight", "7", "-max-watches", "2", "-max-feeds", "3", "-default-deadline", "5s"})
	if err != nil {
		t.Fatal(err)
	}
	l := c.limits.server()
	if l.MaxRequestBytes != 1024 || l.Rate != 5 || l.Burst != 10 || l.MaxInFlight != 7 || l.MaxWatches != 2 || l.MaxFeeds != 3 || l.DefaultDeadline != 5*time.Second {
		t.Fatalf("limits %+v do not follow the flags", l)
	}
}
