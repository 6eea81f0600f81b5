//go:build unix

package diskspace

import "golang.org/x/sys/unix"

// free is the space available to unprivileged writers, which is what a
// non-root daemon can use (root's reserved blocks excluded).
func free(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}

// Total is the size of dir's filesystem, as unprivileged writers see it:
// what a storage budget given as a percentage is a share of.
func Total(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return (uint64(st.Blocks) - (uint64(st.Bfree) - uint64(st.Bavail))) * uint64(st.Bsize), nil
}
