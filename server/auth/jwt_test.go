package auth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc/metadata"

	"github.com/metadatad/metadatad/internal/testwait"
	"github.com/metadatad/metadatad/server/auth"
)

const (
	issuer   = "https://login.example.test/tenant/v2.0"
	audience = "api://metadatad"
)

// signingKey is a provider's key with its key id.
type signingKey struct {
	kid string
	key *ecdsa.PrivateKey
}

func newKey(t *testing.T, kid string) signingKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{kid: kid, key: k}
}

// sign makes a JWT of claims signed by k.
func (k signingKey) sign(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	tok.Header["kid"] = k.kid
	s, err := tok.SignedString(k.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// jwksJSON is the public JWKS of keys.
func jwksJSON(t *testing.T, keys ...signingKey) []byte {
	t.Helper()
	set := jwkset.NewMemoryStorage()
	for _, k := range keys {
		jwk, err := jwkset.NewJWKFromKey(k.key.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: k.kid, ALG: jwkset.AlgES256}})
		if err != nil {
			t.Fatal(err)
		}
		if err := set.KeyWrite(context.Background(), jwk); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := set.JSONPublic(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// jwksServer serves a JWKS on 127.0.0.1 that a test can replace.
type jwksServer struct {
	mu    sync.Mutex
	body  []byte
	srv   *httptest.Server
	fetch int
}

func startJWKS(t *testing.T, body []byte) *jwksServer {
	t.Helper()
	s := &jwksServer{body: body}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.fetch++
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(s.body)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *jwksServer) set(body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body = body
}

// validClaims are claims that pass, with scopes in each place providers use.
func validClaims() jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"iss": issuer, "aud": []string{audience}, "sub": "cron-app",
		"iat": now.Unix(), "nbf": now.Add(-time.Minute).Unix(), "exp": now.Add(time.Hour).Unix(),
		"scp": "metadata.read", "roles": []string{"retention.admin"},
	}
}

func withBearer(token string) context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+token))
}

func newJWTAuthenticator(t *testing.T, jwt auth.JWTOptions) *auth.Authenticator {
	t.Helper()
	jwt.Issuer, jwt.Audience = issuer, audience
	a, err := auth.New(t.Context(), auth.Options{JWT: &jwt, ReloadInterval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("auth.New: %v", err)
	}
	return a
}

func TestJWT(t *testing.T) {
	good := newKey(t, "k1")
	other := newKey(t, "k1") // the same key id, another key: a forged signature
	jwks := startJWKS(t, jwksJSON(t, good))
	a := newJWTAuthenticator(t, auth.JWTOptions{JWKSURL: jwks.srv.URL})

	p, err := a.Authenticate(withBearer(good.sign(t, validClaims())))
	if err != nil {
		t.Fatalf("valid token: %v", err)
	}
	if want := []string{auth.ScopeRead, auth.ScopeRetentionAdmin}; p.Name != "cron-app" || !slices.Equal(p.Scopes, want) {
		t.Errorf("principal %q with %v, want cron-app with %v", p.Name, p.Scopes, want)
	}

	with := func(change func(jwt.MapClaims)) jwt.MapClaims {
		c := validClaims()
		change(c)
		return c
	}
	for _, tc := range []struct {
		name  string
		token string
		want  string
	}{
		{"malformed", "not.a.jwt", "malformed"},
		{"other audience", good.sign(t, with(func(c jwt.MapClaims) { c["aud"] = "api://other" })), "audience"},
		{"other issuer", good.sign(t, with(func(c jwt.MapClaims) { c["iss"] = "https://evil.test/" })), "issuer"},
		{"expired", good.sign(t, with(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Hour).Unix() })), "expired"},
		{"not yet valid", good.sign(t, with(func(c jwt.MapClaims) { c["nbf"] = time.Now().Add(time.Hour).Unix() })), "not valid yet"},
		{"no expiry", good.sign(t, with(func(c jwt.MapClaims) { delete(c, "exp") })), "exp"},
		{"wrongly signed", other.sign(t, validClaims()), "signature"},
		{"unsigned", func() string {
			s, _ := jwt.NewWithClaims(jwt.SigningMethodNone, validClaims()).SignedString(jwt.UnsafeAllowNoneSignatureType)
			return s
		}(), "signing method"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a.Authenticate(withBearer(tc.token))
			if !errors.Is(err, auth.ErrBadCredentials) {
				t.Fatalf("error %v, want ErrBadCredentials", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), tc.token) {
				t.Errorf("error %q quotes the token", err)
			}
		})
	}
}

// TestJWKSRotation: the provider adds a key and signs with it; the first
// token naming the new key fetches the set again and passes, and once the
// old key is retired its tokens fail.
func TestJWKSRotation(t *testing.T) {
	oldKey, newKey := newKey(t, "2026-01"), newKey(t, "2026-02")
	jwks := startJWKS(t, jwksJSON(t, oldKey))
	a := newJWTAuthenticator(t, auth.JWTOptions{JWKSURL: jwks.srv.URL, RefreshInterval: 50 * time.Millisecond, UnknownKeyInterval: time.Millisecond})

	if _, err := a.Authenticate(withBearer(oldKey.sign(t, validClaims()))); err != nil {
		t.Fatalf("token of the first key: %v", err)
	}
	jwks.set(jwksJSON(t, oldKey, newKey))
	if _, err := a.Authenticate(withBearer(newKey.sign(t, validClaims()))); err != nil {
		t.Fatalf("token of the rotated-in key: %v", err)
	}
	jwks.set(jwksJSON(t, newKey))
	testwait.Until(t, 10*time.Second, func() error {
		if _, err := a.Authenticate(withBearer(oldKey.sign(t, validClaims()))); !errors.Is(err, auth.ErrBadCredentials) {
			return fmt.Errorf("token of the retired key: %v, want ErrBadCredentials", err)
		}
		return nil
	})
}

// TestJWKSFile: a local key set is read again when the file changes.
func TestJWKSFile(t *testing.T) {
	first, second := newKey(t, "a"), newKey(t, "b")
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, jwksJSON(t, first), 0o600); err != nil {
		t.Fatal(err)
	}
	a := newJWTAuthenticator(t, auth.JWTOptions{JWKSFile: path})
	if _, err := a.Authenticate(withBearer(first.sign(t, validClaims()))); err != nil {
		t.Fatalf("token of the file's key: %v", err)
	}
	if _, err := a.Authenticate(withBearer(second.sign(t, validClaims()))); !errors.Is(err, auth.ErrBadCredentials) {
		t.Fatalf("token of a key not in the file: %v, want ErrBadCredentials", err)
	}
	if err := os.WriteFile(path, jwksJSON(t, second), 0o600); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, func() error {
		_, err := a.Authenticate(withBearer(second.sign(t, validClaims())))
		return err
	})
}

func TestJWTOptionsRequired(t *testing.T) {
	for name, o := range map[string]auth.JWTOptions{
		"no audience": {JWKSURL: "http://127.0.0.1:1/", Issuer: issuer},
		"no issuer":   {JWKSURL: "http://127.0.0.1:1/", Audience: audience},
		"no keys":     {Issuer: issuer, Audience: audience},
	} {
		if _, err := auth.New(t.Context(), auth.Options{JWT: &o}); err == nil {
			t.Errorf("%s: auth.New succeeded", name)
		}
	}
}
