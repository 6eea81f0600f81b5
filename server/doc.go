// Package server is the gRPC edge of metadatad: one file per service,
// request validation, page tokens, and the one table that maps domain errors
// to gRPC status codes. It is the only package that speaks gRPC status codes;
// everything under store/ returns plain errors.
//
// Every call runs through one interceptor chain (interceptors.go). Its
// order is part of the design: admission comes before authentication, so
// that a flood of calls is refused for the price of a counter, not of a JWT
// verification each. The cap on calls in flight and, with a rate limit, the
// budget of failed authentications of the caller's address go first; then
// the guard authenticates the caller and checks its scope; then the
// caller's own rate applies, by the principal the guard named. The token
// buckets of both rates are forgotten once refilled (ratelimits.go), so
// that callers that come and go leave no memory behind.
package server
