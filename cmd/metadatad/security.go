package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"

	"github.com/metadatad/metadatad/server/auth"
)

// securityConfig is who may call the server and what they may do.
type securityConfig struct {
	tokenFile  string
	jwksURL    string
	jwksFile   string
	issuer     string
	audience   string
	reflection string
}

func (s *securityConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&s.tokenFile, "auth-token-file", "", "static bearer tokens, one a line: token,principal,scope scope ... (an empty token grants the scopes to the client certificate named principal); read again when it changes")
	fs.StringVar(&s.jwksURL, "auth-jwks-url", "", "accept JWT bearer tokens signed by a key of this JWKS, e.g. https://login.microsoftonline.com/TENANT/discovery/v2.0/keys; refreshed in the background")
	fs.StringVar(&s.jwksFile, "auth-jwks-file", "", "accept JWT bearer tokens signed by a key of this JWKS file (instead of -auth-jwks-url); read again when it changes")
	fs.StringVar(&s.issuer, "auth-issuer", "", "with JWTs: the iss they must carry")
	fs.StringVar(&s.audience, "auth-audience", "", "with JWTs: the aud they must include")
	fs.StringVar(&s.reflection, "reflection", "auth", "who may use gRPC reflection: auth (callers with metadata.read) or open (anyone)")
}

func (s *securityConfig) check() error {
	jwt := s.jwksURL != "" || s.jwksFile != "" || s.issuer != "" || s.audience != ""
	switch {
	case s.jwksURL != "" && s.jwksFile != "":
		return fmt.Errorf("give -auth-jwks-url or -auth-jwks-file, not both")
	case jwt && (s.jwksURL == "" && s.jwksFile == "" || s.issuer == "" || s.audience == ""):
		return fmt.Errorf("JWT authentication needs -auth-jwks-url (or -auth-jwks-file), -auth-issuer and -auth-audience together")
	case s.reflection != "auth" && s.reflection != "open":
		return fmt.Errorf("-reflection must be auth or open, not %q", s.reflection)
	}
	return nil
}

// authenticates reports whether callers must authenticate.
func (s *securityConfig) authenticates() bool {
	return s.tokenFile != "" || s.jwksURL != "" || s.jwksFile != ""
}

// authenticator is how the server authenticates its callers; nil when it
// does not. Its reloads run until ctx ends.
func (s *securityConfig) authenticator(ctx context.Context, log *slog.Logger) (*auth.Authenticator, error) {
	if !s.authenticates() {
		return nil, nil
	}
	o := auth.Options{TokenFile: s.tokenFile, Logger: log}
	if s.jwksURL != "" || s.jwksFile != "" {
		o.JWT = &auth.JWTOptions{JWKSURL: s.jwksURL, JWKSFile: s.jwksFile, Issuer: s.issuer, Audience: s.audience}
	}
	return auth.New(ctx, o)
}
