package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
)

// JWTOptions configures the verification of JWT bearer tokens from an
// identity provider such as Microsoft Entra ID.
type JWTOptions struct {
	// JWKSURL is where the provider publishes its signing keys, fetched at
	// start and refreshed in the background every RefreshInterval, and at
	// once (at most every UnknownKeyInterval) when a token names a key the
	// set lacks, as after a key rotation.
	JWKSURL string
	// JWKSFile is a local JWKS, read again when it changes; instead of JWKSURL.
	JWKSFile string
	// Issuer is the iss every token must carry; required.
	Issuer string
	// Audience is the aud every token must include; required.
	Audience string
	// RefreshInterval is how often the JWKS is fetched again; 0 means an hour.
	RefreshInterval time.Duration
	// UnknownKeyInterval bounds refreshes caused by unknown key ids; 0
	// means a minute.
	UnknownKeyInterval time.Duration
	// HTTPClient fetches JWKSURL; nil means http.DefaultClient.
	HTTPClient *http.Client
}

// Leeway is the clock skew allowed between this server and the token
// issuer when checking exp and nbf.
const Leeway = 30 * time.Second

// signingMethods are the algorithms an identity provider signs with. HMAC
// is left out: a shared secret is not a public key set.
var signingMethods = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// jwtVerifier checks JWTs against a key set.
type jwtVerifier struct {
	parser *jwt.Parser
	keys   atomic.Pointer[keyfunc.Keyfunc]
}

func newJWTVerifier(ctx context.Context, o JWTOptions, reload time.Duration, log *slog.Logger) (*jwtVerifier, error) {
	switch {
	case o.Issuer == "" || o.Audience == "":
		return nil, errors.New("JWT verification needs an issuer and an audience")
	case (o.JWKSURL == "") == (o.JWKSFile == ""):
		return nil, errors.New("JWT verification needs one of a JWKS URL and a JWKS file")
	}
	v := &jwtVerifier{parser: jwt.NewParser(
		jwt.WithIssuer(o.Issuer), jwt.WithAudience(o.Audience), jwt.WithExpirationRequired(),
		jwt.WithValidMethods(signingMethods), jwt.WithLeeway(Leeway),
	)}
	if o.JWKSFile != "" {
		err := watchFile(ctx, o.JWKSFile, reload, log, func(data []byte) error {
			k, err := keyfunc.NewJWKSetJSON(json.RawMessage(data))
			if err != nil {
				return err
			}
			v.keys.Store(&k)
			return nil
		})
		return v, err
	}
	if o.RefreshInterval <= 0 {
		o.RefreshInterval = time.Hour
	}
	if o.UnknownKeyInterval <= 0 {
		o.UnknownKeyInterval = time.Minute
	}
	failFirst := false
	k, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{o.JWKSURL}, keyfunc.Override{
		Client:                    o.HTTPClient,
		HTTPTimeout:               10 * time.Second,
		NoErrorReturnFirstHTTPReq: &failFirst,
		RefreshInterval:           o.RefreshInterval,
		RefreshUnknownKID:         rate.NewLimiter(rate.Every(o.UnknownKeyInterval), 1),
		RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
			return func(ctx context.Context, err error) {
				log.ErrorContext(ctx, "refreshing JWKS, keeping the last keys", "url", u, "err", err)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("JWKS %s: %w", o.JWKSURL, err)
	}
	v.keys.Store(&k)
	return v, nil
}

// claims are the registered claims plus where providers put scopes:
// scope or scp (space separated; some providers send a list) and roles,
// which Entra ID uses for the app roles of client-credential tokens.
type claims struct {
	jwt.RegisteredClaims
	Scope any      `json:"scope"`
	Scp   any      `json:"scp"`
	Roles []string `json:"roles"`
}

// verify checks token's signature, expiry, not-before, issuer and audience
// and returns its subject with its scopes. The error describes what failed
// without quoting the token.
func (v *jwtVerifier) verify(ctx context.Context, token string) (Principal, error) {
	var c claims
	keys := *v.keys.Load()
	if _, err := v.parser.ParseWithClaims(token, &c, keys.KeyfuncCtx(ctx)); err != nil {
		return Principal{}, err
	}
	if c.Subject == "" {
		return Principal{}, errors.New("token has no subject")
	}
	scopes := append(scopeClaim(c.Scope), scopeClaim(c.Scp)...)
	return newPrincipal(c.Subject, append(scopes, c.Roles...)), nil
}

// scopeClaim reads a scope claim given as a space separated string or as a
// list of strings.
func scopeClaim(v any) []string {
	switch v := v.(type) {
	case string:
		return strings.Fields(v)
	case []any:
		var scopes []string
		for _, s := range v {
			if s, ok := s.(string); ok {
				scopes = append(scopes, s)
			}
		}
		return scopes
	}
	return nil
}
