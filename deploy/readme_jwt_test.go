package deploy_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestReadmeJWTExample runs the Secured deployment section's JWT example
// as written, with Entra ID played by the test: its JWKS is served over
// TLS on loopback at the example's path (only the host changes; the
// daemon trusts the test's certificate through SSL_CERT_FILE, as Go reads
// it), $TENANT is a tenant id of the test's, and `az account
// get-access-token --resource R` is a token the test signs as the
// provider would: issuer the example's -auth-issuer, audience R, and the
// app roles the call needs (retention.admin, and metadata.read for
// grpcurl's reflection). The grpcurl call must succeed.
func TestReadmeJWTExample(t *testing.T) {
	var example string
	for _, block := range readmeSections(t)["Secured deployment"] {
		if strings.Contains(block, "-auth-jwks-url") {
			example = block
		}
	}
	if example == "" {
		t.Fatal("the Secured deployment section has no JWT example")
	}
	const tenant = "3f2504e0-4f89-11d3-9a0c-0305e82c3301"
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	jwks := fmt.Sprintf(`{"keys":[{"kty":"EC","crv":"P-256","kid":"readme-key","alg":"ES256","use":"sig","x":%q,"y":%q}]}`,
		b64(key.X.FillBytes(make([]byte, 32))), b64(key.Y.FillBytes(make([]byte, 32))))
	provider := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/"+tenant+"/discovery/v2.0/keys" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, jwks)
	}))
	t.Cleanup(provider.Close)
	caFile := filepath.Join(t.TempDir(), "provider.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: provider.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}

	var issuer, token, addr string
	calls := 0
	for _, line := range commandLines(example) {
		line = strings.ReplaceAll(strings.TrimSpace(line), "$TENANT", tenant)
		if token != "" {
			line = strings.ReplaceAll(line, "$TOKEN", token)
		}
		if getToken := regexp.MustCompile(`^TOKEN=\$\(az account get-access-token --resource (\S+) --query accessToken -o tsv\)$`).FindStringSubmatch(line); getToken != nil {
			if issuer == "" {
				t.Fatal("the example asks for a token before it starts metadatad")
			}
			token = signToken(t, key, issuer, getToken[1])
			continue
		}
		words := shellWords(t, line)
		switch {
		case len(words) == 0:
		case words[0] == "metadatad":
			args := words[1:]
			for i, a := range args {
				if i > 0 && args[i-1] == "-auth-issuer" {
					issuer = a
				}
				if i > 0 && args[i-1] == "-auth-jwks-url" {
					args[i] = strings.Replace(a, "https://login.microsoftonline.com", provider.URL, 1)
				}
			}
			args = append(args, "-listen=127.0.0.1:0", "-data-dir="+t.TempDir(), "-min-free-mib=0", "-log-format=json")
			addr = startDaemon(t, args, []string{"SSL_CERT_FILE=" + caFile})["serving"]
		case words[0] == "grpcurl":
			if addr == "" {
				t.Fatal("the example runs grpcurl before it starts metadatad")
			}
			calls++
			args := words[1:]
			for i, a := range args {
				args[i] = strings.ReplaceAll(a, "localhost:50051", addr)
			}
			if out, err := exec.Command(grpcurl, args...).CombinedOutput(); err != nil {
				t.Errorf("grpcurl %q: %v\n%s", args, err, out)
			}
		default:
			t.Fatalf("the example runs %q, which this test does not know", line)
		}
	}
	if calls == 0 {
		t.Fatal("the example makes no call")
	}
}

// signToken is an access token as Entra ID issues one for an application
// with app roles: signed by the JWKS's key, for audience, an hour long.
func signToken(t *testing.T, key *ecdsa.PrivateKey, issuer, audience string) string {
	t.Helper()
	now := time.Now()
	claims := jwt.MapClaims{
		"iss": issuer, "aud": audience, "sub": "readme-client", "iat": now.Unix(), "nbf": now.Unix(),
		"exp": now.Add(time.Hour).Unix(), "roles": []string{"retention.admin", "metadata.read"},
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	tok.Header["kid"] = "readme-key"
	signed, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return signed
}
