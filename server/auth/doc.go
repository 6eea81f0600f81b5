// Package auth decides who is calling metadatad and what they may do.
//
// A call's credentials become a Principal: a bearer token from a static
// token file, a JWT from an identity provider checked against its JWKS, or
// the verified client certificate of a mutual TLS connection. A Guard then
// lets the call through only if the principal holds the scope its method
// requires; the scopes come from the API's proto options, read by the
// server. Secrets (tokens, keys, JWTs) never reach a log line or an error
// message.
package auth
