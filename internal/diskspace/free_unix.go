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
