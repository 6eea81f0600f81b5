//go:build !unix

package diskspace

import "errors"

// free cannot measure space outside unix; the guard then stands aside.
func free(string) (uint64, error) { return 0, errors.ErrUnsupported }

// Total cannot measure a filesystem outside unix.
func Total(string) (uint64, error) { return 0, errors.ErrUnsupported }
