// Package grpcclient dials metadatad the way its command-line tools do:
// plaintext, TLS or mutual TLS from PEM files, and a bearer token, all
// from flags.
package grpcclient
