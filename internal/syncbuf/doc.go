// Package syncbuf is a bytes.Buffer that several goroutines may write at
// once: where tests collect the log lines of an engine's goroutines.
package syncbuf
