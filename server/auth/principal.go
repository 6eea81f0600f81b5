package auth

import (
	"context"
	"slices"
	"strings"
)

// The scopes a method can require. Each RPC names one in its
// (metadata.v1.required_scope) option.
const (
	// ScopeRead allows get, list and watch of any data.
	ScopeRead = "metadata.read"
	// ScopeWrite allows create, record and update.
	ScopeWrite = "metadata.write"
	// ScopeDelete allows deleting device state.
	ScopeDelete = "metadata.delete"
	// ScopeRetentionAdmin allows every RetentionService RPC.
	ScopeRetentionAdmin = "retention.admin"
	// ScopeAdmin allows every AdminService RPC: backups.
	ScopeAdmin = "metadata.admin"
)

// Scopes lists every scope a method may require, in the order above.
var Scopes = []string{ScopeRead, ScopeWrite, ScopeDelete, ScopeRetentionAdmin, ScopeAdmin}

// Principal is an authenticated caller.
type Principal struct {
	// Name identifies the caller in logs and errors: a token file's
	// principal, a JWT's subject, or a client certificate's identity.
	Name string
	// Scopes are the scopes the caller holds, sorted.
	Scopes []string
}

// Has reports whether p holds scope.
func (p Principal) Has(scope string) bool { return slices.Contains(p.Scopes, scope) }

// newPrincipal returns a principal holding scopes, sorted and without repeats.
func newPrincipal(name string, scopes []string) Principal {
	s := slices.Clone(scopes)
	slices.Sort(s)
	return Principal{Name: name, Scopes: slices.Compact(s)}
}

func (p Principal) scopeList() string {
	if len(p.Scopes) == 0 {
		return "no scopes"
	}
	return strings.Join(p.Scopes, " ")
}

type principalKey struct{}

// caller is where the Guard leaves the principal of a call for the
// interceptors outside it, which see only the context they started with.
type caller struct{ principal *Principal }

type callerKey struct{}

// WithCaller returns ctx with room for the call's principal, so that an
// interceptor running outside the Guard (the call's log line) can name it
// through CallerName once the Guard has run.
func WithCaller(ctx context.Context) context.Context {
	return context.WithValue(ctx, callerKey{}, &caller{})
}

// CallerName is the name of the principal the Guard found for the call
// whose context went through WithCaller, or "" if there is none (yet).
func CallerName(ctx context.Context) string {
	if c, ok := ctx.Value(callerKey{}).(*caller); ok && c.principal != nil {
		return c.principal.Name
	}
	return ""
}

// FromContext returns the principal the Guard let through.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// withPrincipal records p as the call's principal.
func withPrincipal(ctx context.Context, p Principal) context.Context {
	if c, ok := ctx.Value(callerKey{}).(*caller); ok {
		c.principal = &p
	}
	return context.WithValue(ctx, principalKey{}, p)
}
