// Package aztable is the scale-out backend of the store contract, on Azure
// Table Storage through the Azure SDK for Go (aztables).
//
// Many metadatad replicas share one storage account; the tables are the ones
// the existing .NET system reads and writes, so entities keep their
// PascalCase property names and Edm types, encoded by store.MarshalEDM.
//
// What Azure lacks, the backend does not pretend to have: there is no
// transaction across partitions or tables (no store.Transactor) and no range
// delete (no store.Purger); callers take their fallbacks. What Azure does differently, the backend absorbs: tables are
// created on first use with 409 TableAlreadyExists taken as success; list
// pages that end early, even empty, are followed to the next token; a failed
// batch's index is read from inside its multipart answer; throttling (503
// Server Busy, 500 Operation Timeout) and dropped connections are retried
// with exponential backoff by azcore's retry policy; and a retried write
// whose first attempt was applied, its answer lost, is recognised rather than
// reported as a conflict (replay.go). A write's Timestamp is the service's,
// read from the ETag Azure answers with; where an answer's ETag carries no
// time the Date header (to the second) or the local clock stands in, and
// each such fallback is logged once per cause and counted (clock.go).
//
// Every call is checked by the portable layer (store.NewBackend) before a
// request is built, so both backends refuse the same input with the same
// errors and the engine here trusts what it gets.
//
// The backend is written for Azure Table Storage and tested on Azurite.
// Cosmos DB for Table speaks the same API but does not return rows in key
// order, which Query, Scan and their cursors rely on.
package aztable
