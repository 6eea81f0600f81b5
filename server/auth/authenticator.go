package auth

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// Options configures New. At least one way of authenticating is required.
type Options struct {
	// TokenFile is a static token file (see the README), read again when it
	// changes.
	TokenFile string
	// JWT verifies JWT bearer tokens; nil accepts none.
	JWT *JWTOptions
	// ClientCertificates makes the verified client certificate of a mutual
	// TLS connection a principal, holding the scopes TokenFile grants its
	// identity. It needs TokenFile: without grants a certificate can call
	// nothing.
	ClientCertificates bool
	// ReloadInterval is how often TokenFile and JWT.JWKSFile are read again;
	// 0 means 10 seconds.
	ReloadInterval time.Duration
	// Logger receives reload errors; nil means slog.Default.
	Logger *slog.Logger
}

// Errors of Authenticate.
var (
	// ErrNoCredentials is a call with neither a bearer token nor a verified
	// client certificate.
	ErrNoCredentials = errors.New("auth: no credentials")
	// ErrBadCredentials is a bearer token that is unknown, malformed or fails
	// verification.
	ErrBadCredentials = errors.New("auth: bad credentials")
)

// credentialError is a failed authentication: Error is the reason a caller
// is told, Is matches its sentinel.
type credentialError struct {
	sentinel error
	reason   string
}

func (e *credentialError) Error() string        { return e.reason }
func (e *credentialError) Is(target error) bool { return target == e.sentinel }

func noCredentials(reason string) error { return &credentialError{ErrNoCredentials, reason} }

func badCredentials(format string, args ...any) error {
	return &credentialError{ErrBadCredentials, fmt.Sprintf(format, args...)}
}

// Authenticator finds the principal behind a call's credentials.
type Authenticator struct {
	tokens *tokenFile
	jwt    *jwtVerifier
	certs  bool
}

// New starts the authenticator; its background reloads and key refreshes
// run until ctx ends.
func New(ctx context.Context, o Options) (*Authenticator, error) {
	if o.TokenFile == "" && o.JWT == nil {
		return nil, errors.New("auth: give a token file or JWT verification")
	}
	if o.ClientCertificates && o.TokenFile == "" {
		return nil, errors.New("auth: client certificates hold the scopes a token file grants their identity: give a token file with lines ',IDENTITY,SCOPES'")
	}
	if o.ReloadInterval <= 0 {
		o.ReloadInterval = 10 * time.Second
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	a := &Authenticator{certs: o.ClientCertificates}
	if o.TokenFile != "" {
		a.tokens = &tokenFile{}
		if err := watchFile(ctx, o.TokenFile, o.ReloadInterval, log, a.tokens.load); err != nil {
			return nil, fmt.Errorf("auth: token file %w", err)
		}
	}
	if o.JWT != nil {
		v, err := newJWTVerifier(ctx, *o.JWT, o.ReloadInterval, log)
		if err != nil {
			return nil, fmt.Errorf("auth: %w", err)
		}
		a.jwt = v
	}
	return a, nil
}

// Authenticate returns the principal of the call in ctx: the holder of its
// bearer token if it sends one, else, with ClientCertificates, the identity
// of its verified client certificate. Errors match ErrNoCredentials or
// ErrBadCredentials, say why, and never quote the token.
func (a *Authenticator) Authenticate(ctx context.Context) (Principal, error) {
	token, sent, err := bearerToken(ctx)
	if err != nil {
		return Principal{}, err
	}
	if sent {
		return a.verifyToken(ctx, token)
	}
	if a.certs {
		if id, ok := clientIdentity(ctx); ok {
			return newPrincipal(id, a.tokens.grants(id)), nil
		}
		return Principal{}, noCredentials("send a bearer token or a client certificate")
	}
	return Principal{}, noCredentials("send a bearer token in the authorization header")
}

func (a *Authenticator) verifyToken(ctx context.Context, token string) (Principal, error) {
	if a.tokens != nil {
		if p, ok := a.tokens.lookup(token); ok {
			return p, nil
		}
	}
	if a.jwt != nil && strings.Count(token, ".") == 2 {
		p, err := a.jwt.verify(ctx, token)
		if err != nil {
			return Principal{}, badCredentials("invalid JWT: %v", err)
		}
		return p, nil
	}
	return Principal{}, badCredentials("unknown bearer token")
}

// bearerToken reads the authorization header: sent is false without one.
func bearerToken(ctx context.Context) (token string, sent bool, err error) {
	md, _ := metadata.FromIncomingContext(ctx)
	values := md.Get("authorization")
	switch {
	case len(values) == 0:
		return "", false, nil
	case len(values) > 1:
		return "", true, badCredentials("more than one authorization header")
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(token) == "" {
		return "", true, badCredentials("the authorization header must be \"Bearer TOKEN\"")
	}
	return strings.TrimSpace(token), true, nil
}

// clientIdentity is the identity of the connection's verified client
// certificate: its first URI SAN (a SPIFFE id, say), else its first DNS
// SAN, else its subject.
func clientIdentity(ctx context.Context) (string, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "", false
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return "", false
	}
	return CertificateIdentity(info.State.VerifiedChains[0][0]), true
}

// CertificateIdentity names the principal a client certificate stands for:
// its first URI SAN, else its first DNS SAN, else its subject.
func CertificateIdentity(c *x509.Certificate) string {
	switch {
	case len(c.URIs) > 0:
		return c.URIs[0].String()
	case len(c.DNSNames) > 0:
		return c.DNSNames[0]
	}
	return c.Subject.String()
}
