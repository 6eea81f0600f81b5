// Package testcerts makes certificate authorities and certificates for
// tests, in memory, so that no private key is ever committed.
package testcerts
