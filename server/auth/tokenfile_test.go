package auth_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/metadatad/metadatad/internal/testwait"
	"github.com/metadatad/metadatad/server/auth"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func newTokenAuthenticator(t *testing.T, content string, certs bool) (*auth.Authenticator, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, content)
	a, err := auth.New(t.Context(), auth.Options{
		TokenFile: path, ClientCertificates: certs, ReloadInterval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatalf("auth.New: %v", err)
	}
	return a, path
}

func TestTokenFile(t *testing.T) {
	a, path := newTokenAuthenticator(t, "# comment\n\ns3cret-cron, cron ,retention.admin metadata.read\nreader-token,dashboard,metadata.read\n", false)
	p, err := a.Authenticate(withBearer("s3cret-cron"))
	if err != nil {
		t.Fatalf("known token: %v", err)
	}
	if want := []string{auth.ScopeRead, auth.ScopeRetentionAdmin}; p.Name != "cron" || !slices.Equal(p.Scopes, want) {
		t.Errorf("principal %q with %v, want cron with %v", p.Name, p.Scopes, want)
	}

	for _, tc := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"no token", context.Background(), auth.ErrNoCredentials},
		{"unknown token", withBearer("guess"), auth.ErrBadCredentials},
		{"not bearer", metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Basic czNjcmV0LWNyb24=")), auth.ErrBadCredentials},
		{"empty bearer", metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer ")), auth.ErrBadCredentials},
		{"two headers", metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer s3cret-cron", "authorization", "Bearer x")), auth.ErrBadCredentials},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := a.Authenticate(tc.ctx); !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
		})
	}

	t.Run("reload", func(t *testing.T) {
		writeFile(t, path, "new-token,cron,metadata.read\n")
		testwait.Until(t, 10*time.Second, func() error { _, err := a.Authenticate(withBearer("new-token")); return err })
		if _, err := a.Authenticate(withBearer("s3cret-cron")); !errors.Is(err, auth.ErrBadCredentials) {
			t.Errorf("removed token: %v, want ErrBadCredentials", err)
		}
		// A broken version is refused and the last good one stays.
		writeFile(t, path, "new-token,cron,metadata.everything\n")
		time.Sleep(100 * time.Millisecond)
		if _, err := a.Authenticate(withBearer("new-token")); err != nil {
			t.Errorf("after a broken reload: %v", err)
		}
	})
	t.Run("symlink swap", func(t *testing.T) {
		// Kubernetes updates a Secret volume by pointing ..data at a new directory.
		dir := t.TempDir()
		for v, content := range map[string]string{"v1": "first,cron,metadata.read\n", "v2": "second,cron,metadata.read\n"} {
			if err := os.Mkdir(filepath.Join(dir, v), 0o700); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, v, "tokens"), content)
		}
		if err := os.Symlink("v1", filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..data", "tokens"), filepath.Join(dir, "tokens")); err != nil {
			t.Fatal(err)
		}
		a, err := auth.New(t.Context(), auth.Options{TokenFile: filepath.Join(dir, "tokens"), ReloadInterval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Authenticate(withBearer("first")); err != nil {
			t.Fatalf("first version: %v", err)
		}
		if err := os.Symlink("v2", filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		testwait.Until(t, 10*time.Second, func() error { _, err := a.Authenticate(withBearer("second")); return err })
	})
}

func TestTokenFileErrors(t *testing.T) {
	for _, tc := range []struct{ name, content, want string }{
		{"fields", "tok,cron\n", "line 1"},
		{"no principal", "tok,,metadata.read\n", "no principal"},
		{"no scopes", "tok,cron,\n", "no scopes"},
		{"unknown scope", "# c\ntok,cron,metadata.everything\n", "line 2: unknown scope \"metadata.everything\""},
		{"repeated token", "tok,a,metadata.read\ntok,b,metadata.write\n", "line 2"},
		{"empty", "# nothing\n", "no tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokens")
			writeFile(t, path, tc.content)
			_, err := auth.New(t.Context(), auth.Options{TokenFile: path})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "tok,") {
				t.Errorf("error %q quotes the file", err)
			}
		})
	}
}

// withClientCert is a call over a mutual TLS connection whose verified
// client certificate is cert.
func withClientCert(cert *x509.Certificate) context.Context {
	info := credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}}
	return peer.NewContext(context.Background(), &peer.Peer{AuthInfo: info})
}

func TestClientCertificatePrincipal(t *testing.T) {
	a, _ := newTokenAuthenticator(t, ",spiffe://fleet.test/cron,retention.admin\n,reader.fleet.test,metadata.read\ntok,someone,metadata.write\n", true)
	spiffe, _ := url.Parse("spiffe://fleet.test/cron")
	for _, tc := range []struct {
		name   string
		cert   *x509.Certificate
		want   string
		scopes []string
	}{
		{"URI SAN first", &x509.Certificate{URIs: []*url.URL{spiffe}, DNSNames: []string{"reader.fleet.test"}}, "spiffe://fleet.test/cron", []string{auth.ScopeRetentionAdmin}},
		{"else DNS SAN", &x509.Certificate{DNSNames: []string{"reader.fleet.test"}, Subject: pkix.Name{CommonName: "x"}}, "reader.fleet.test", []string{auth.ScopeRead}},
		{"else subject, no grants", &x509.Certificate{Subject: pkix.Name{CommonName: "nobody"}}, "CN=nobody", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := a.Authenticate(withClientCert(tc.cert))
			if err != nil {
				t.Fatal(err)
			}
			if p.Name != tc.want || !slices.Equal(p.Scopes, tc.scopes) {
				t.Errorf("principal %q with %v, want %q with %v", p.Name, p.Scopes, tc.want, tc.scopes)
			}
		})
	}
	// A bearer token wins over the certificate.
	ctx := metadata.NewIncomingContext(withClientCert(&x509.Certificate{URIs: []*url.URL{spiffe}}), metadata.Pairs("authorization", "Bearer tok"))
	if p, err := a.Authenticate(ctx); err != nil || p.Name != "someone" {
		t.Errorf("token over certificate: %q, %v; want someone", p.Name, err)
	}
	if _, err := a.Authenticate(context.Background()); !errors.Is(err, auth.ErrNoCredentials) {
		t.Errorf("no certificate, no token: %v, want ErrNoCredentials", err)
	}
	if _, err := auth.New(t.Context(), auth.Options{ClientCertificates: true, JWT: &auth.JWTOptions{}}); err == nil {
		t.Error("client certificates without a token file: auth.New succeeded")
	}
}
