// Package server is the gRPC edge of metadatad: one file per service,
// request validation, page tokens, and the one table that maps domain errors
// to gRPC status codes. It is the only package that speaks gRPC status codes;
// everything under store/ returns plain errors.
package server
