// Package storetest is the conformance suite of the table contract in package
// store. Every backend runs it against itself, so that a program sees the same
// keys, orders, limits and errors on the embedded backend as on Azure Table
// Storage. A backend's test needs only a harness that opens a fresh backend:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Backend {
//			b, err := engine.Open(engine.Options{Dir: t.TempDir()})
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { b.Close() })
//			return b
//		})
//	}
//
// The suite checks errors with errors.Is and errors.As: the sentinels of
// package store are the contract callers rely on. Only the Refusals part
// compares text, with the portable layer's (store.NewBackend) own answer,
// to show that every backend refuses invalid input through that one layer. The
// optional interfaces (store.Transactor on the backend, store.Counter on its
// tables) are tested when a backend has them; only their subtests are
// skipped, with a message, when it has not.
package storetest
