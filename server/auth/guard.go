package auth

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Open marks a method in a Guard's table that anyone may call, without
// credentials: health checks.
const Open = ""

// Guard lets a call through when its caller holds the scope its method
// requires. Its Authorize is the AuthFunc of go-grpc-middleware's auth
// interceptor.
type Guard struct {
	authn *Authenticator
	// scopes maps each full method name (/package.Service/Method) to the
	// scope it requires, or Open. A method not in it is refused.
	scopes map[string]string
}

// anonymous is every caller of a server without authentication.
var anonymous = newPrincipal("anonymous", Scopes)

// NewGuard returns a guard for the methods of scopes. With a nil
// authenticator every caller is the principal "anonymous" holding every
// scope, as on a development server.
func NewGuard(authn *Authenticator, scopes map[string]string) *Guard {
	return &Guard{authn: authn, scopes: scopes}
}

// Authorize authenticates the call in ctx and checks its scope: no or bad
// credentials are UNAUTHENTICATED, a missing scope PERMISSION_DENIED naming
// it. The returned context carries the principal (see FromContext).
func (g *Guard) Authorize(ctx context.Context) (context.Context, error) {
	method, _ := grpc.Method(ctx)
	scope, known := g.scopes[method]
	if !known {
		return nil, status.Errorf(codes.PermissionDenied, "method %s is not open to any caller", method)
	}
	if scope == Open {
		return ctx, nil
	}
	p := anonymous
	if g.authn != nil {
		var err error
		if p, err = g.authn.Authenticate(ctx); err != nil {
			return nil, status.Error(codes.Unauthenticated, err.Error())
		}
	}
	ctx = withPrincipal(ctx, p)
	if !p.Has(scope) {
		return nil, status.Error(codes.PermissionDenied, fmt.Sprintf("%s needs scope %s; %s holds %s", method, scope, p.Name, p.scopeList()))
	}
	return ctx, nil
}
