// Package azretry holds the retry policy both Azure backends (tables and
// queue) use, so that throttling and dropped connections are handled alike
// on every request metadatad makes to a storage account.
package azretry
